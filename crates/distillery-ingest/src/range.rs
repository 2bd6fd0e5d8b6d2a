//! Byte ranges of an input: what a reader reads of one ([`ByteRange`], `read_mode`), and the
//! reader of a plain file's lines in a range (`LineRange`).
//!
//! See [`ByteRange`] for what a read of a range gives.

use std::io::{self, BufRead, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use distillery_core::spec::Format;
use memchr::memchr;

use crate::input::Compression;
use crate::{IngestError, InputCtx, Opener};

/// Part of an input file, in raw (compressed) bytes: `[start, end)`.
///
/// A big input is read as several tasks, each over a byte range of the file
/// ([`crate::split_ranges`] plans them). Ranges may be cut naively, anywhere; the readers make
/// every record belong to exactly one range, as Hadoop's line record reader does:
///
/// - Plain (uncompressed) line inputs: Freebase N-Triples, a Wikidata JSON dump in its
///   one-entity-a-line layout, JSON-lines QA files. A range reads the lines whose first byte
///   lies in `[start, end)`. With `start > 0` it reads from `start - 1` and drops everything up
///   to the first newline: the line that began before `start` belongs to the range before (when
///   byte `start - 1` is itself a newline, the range's first line starts exactly at `start`). It
///   reads past `end` to finish its last line.
/// - Multistream bz2 MediaWiki dumps: a range reads the bz2 streams that start in
///   `[start, end)`, found by scanning from `start` (see [`crate::mediawiki`]). A single-stream
///   bz2 dump is one stream: only a range holding offset 0 reads anything, unless the ranges
///   are block ranges ([`ByteRange::blocks`], what [`crate::split_ranges`] plans for one): a
///   block range reads the bz2 blocks whose 48-bit magic starts in bits `[8 start, 8 end)`,
///   and on until the last page that began in them ends.
/// - Everything else cannot be split: gzip, zstd or bz2 line files, JSON arrays, plain or gzip
///   XML dumps, FB15k, MetaQA. A range over one must cover the whole file (start 0, end at or
///   past its size) and is then read exactly as without a range; any other range is an error.
///
/// Positions under a range. A range cannot know how many lines or records come before it
/// without reading them, and what a record says must not depend on how its file was cut. So a
/// read of a splittable input under a range, any range (one covering the whole file too),
/// records only positions that do not depend on the cut: absolute byte offsets (in a bz2 dump,
/// the compressed offset of a stream and the offset in its text, see [`crate::mediawiki`]), no
/// line numbers (`Triple::line` is `None`) and no record indexes (quarantine `line` and
/// `record` are `None`). Quarantine ids are computed from those positions, so they are the same for every
/// cut, though not the same as a read without a range. Records and their ids are otherwise
/// identical to a whole read, in the same order.
///
/// Context documents and tables of QA files. A whole read writes each once per file; a range
/// cannot know what the ranges before it wrote, so each range writes the ones its questions
/// use. One shared by questions of two ranges comes out of both, with the same id and content:
/// keeping the first record of each id gives the whole read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
    /// A bz2 MediaWiki dump read by its blocks, not its streams (a single-stream dump cut
    /// into several ranges); ignored for other inputs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocks: bool,
}

impl ByteRange {
    pub fn new(start: u64, end: u64) -> ByteRange {
        ByteRange {
            start,
            end,
            blocks: false,
        }
    }

    /// A range of a bz2 dump read by its blocks.
    pub fn of_blocks(start: u64, end: u64) -> ByteRange {
        ByteRange {
            start,
            end,
            blocks: true,
        }
    }

    /// Whether the range covers a whole file of `size` bytes.
    pub fn covers(&self, size: u64) -> bool {
        self.start == 0 && self.end >= size
    }
}

/// Bytes of a file's head read to tell how it can be split.
pub(crate) const HEAD_BYTES: u64 = 1 << 16;

/// Bytes fetched per `read_range` call when reading a range.
const CHUNK: u64 = 4 << 20;

/// The layout family of a format, as far as splitting goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// N-Triples lines (Freebase).
    NTriples,
    /// A Wikidata JSON dump.
    WikidataJson,
    /// A QA file read element by element (a JSON array or JSON lines).
    JsonQa,
    /// A MediaWiki XML export.
    MediaWiki,
    /// Read whole: side files or line-aligned companions (FB15k, MetaQA).
    Other,
}

impl Shape {
    pub fn of(format: Format) -> Shape {
        match format {
            Format::MediaWiki => Shape::MediaWiki,
            Format::Freebase => Shape::NTriples,
            Format::Wikidata => Shape::WikidataJson,
            Format::HotpotQa
            | Format::Musique
            | Format::TwoWiki
            | Format::HybridQa
            | Format::TatQa
            | Format::Cwq
            | Format::SimpleQa
            | Format::WebQuestions
            | Format::WebQsp
            | Format::Qald
            | Format::HotpotAdv
            | Format::ZeroShotRe
            | Format::WikiOfGraph
            | Format::CommonsenseQa
            | Format::NqOpen => Shape::JsonQa,
            Format::Fb15k | Format::MetaQaKb | Format::MetaQa | Format::MediaWikiLog => {
                Shape::Other
            }
        }
    }
}

/// How a file can be split, told from its first bytes (raw, as stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Splittable {
    /// At line boundaries (a plain line file).
    Lines,
    /// At bz2 stream starts (a bz2 MediaWiki dump).
    Streams,
    No,
}

pub(crate) fn splittable(shape: Shape, head: &[u8]) -> Splittable {
    let plain = Compression::detect(head) == Compression::None;
    match shape {
        Shape::MediaWiki if head.len() >= 4 && head.starts_with(b"BZh") => {
            if (b'1'..=b'9').contains(&head[3]) {
                Splittable::Streams
            } else {
                Splittable::No
            }
        }
        Shape::NTriples if plain => Splittable::Lines,
        Shape::WikidataJson if plain && crate::kb::wikidata::is_line_layout(head) => {
            Splittable::Lines
        }
        Shape::JsonQa if plain && is_json_lines(head, HEAD_BYTES as usize) => Splittable::Lines,
        _ => Splittable::No,
    }
}

/// Whether a file head is JSON lines: its first element starts with `{` and, when its first
/// line is complete in the head, that line alone is valid JSON (a pretty-printed object's first
/// line is not). `cut` is the head length at which the head was cut short.
pub(crate) fn is_json_lines(head: &[u8], cut: usize) -> bool {
    let cut_short = head.len() >= cut;
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let Some(first) = head.iter().position(|b| !b.is_ascii_whitespace()) else {
        return false;
    };
    let rest = &head[first..];
    if rest[0] != b'{' {
        return false;
    }
    match memchr(b'\n', rest) {
        Some(i) => serde_json::from_slice::<serde::de::IgnoredAny>(&rest[..i]).is_ok(),
        // One line longer than the head: assume JSON lines; a whole file of one line is one
        // element either way.
        None => cut_short || serde_json::from_slice::<serde::de::IgnoredAny>(rest).is_ok(),
    }
}

/// What a reader reads under its context's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadMode {
    /// The whole file, positions by line and record (no range, or a range covering an
    /// unsplittable file).
    Whole,
    /// The lines of a plain file that start in the range.
    Lines(ByteRange),
    /// The bz2 streams of a dump that start in the range.
    Streams(ByteRange),
    /// The bz2 blocks of a dump that start in the range.
    Blocks(ByteRange),
}

/// The first bytes of a file (raw) and its size.
pub(crate) fn head(opener: &dyn Opener, location: &str) -> Result<(Vec<u8>, u64), IngestError> {
    let size = opener
        .size(location)
        .map_err(|e| IngestError::io(location, e))?;
    let head = opener
        .read_range(location, 0, HEAD_BYTES.min(size))
        .map_err(|e| IngestError::io(location, e))?;
    Ok((head, size))
}

/// How to read `ctx` under its range (see the module docs); an error for a range that cuts an
/// unsplittable file.
pub(crate) fn read_mode(shape: Shape, ctx: &InputCtx<'_>) -> Result<ReadMode, IngestError> {
    let Some(range) = ctx.range else {
        return Ok(ReadMode::Whole);
    };
    if range.start > range.end {
        return Err(IngestError::invalid(
            &ctx.location,
            format!(
                "byte range {}..{} ends before it starts",
                range.start, range.end
            ),
        ));
    }
    let (head, size) = head(ctx.opener, &ctx.location)?;
    match splittable(shape, &head) {
        Splittable::Lines => Ok(ReadMode::Lines(range)),
        Splittable::Streams if range.blocks => Ok(ReadMode::Blocks(range)),
        Splittable::Streams => Ok(ReadMode::Streams(range)),
        Splittable::No if range.covers(size) => Ok(ReadMode::Whole),
        Splittable::No => Err(IngestError::invalid(
            &ctx.location,
            format!(
                "byte range {}..{} of a {size}-byte input that cannot be split (compressed \
                 other than multistream bz2, or not in a line layout): read it as one range",
                range.start, range.end
            ),
        )),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Dropping the line that began before the range.
    Skip,
    /// Inside the range.
    Read,
    /// Past the range's end: finishing its last line.
    Finish,
    Done,
}

/// The lines of a plain file whose first byte lies in a [`ByteRange`], as a `BufRead` (see the
/// module docs), fetched with [`Opener::read_range`] in 4 MiB chunks and counted in
/// `bytes_read`.
pub(crate) struct LineRange<'a> {
    opener: &'a dyn Opener,
    location: String,
    counter: Arc<AtomicU64>,
    size: u64,
    end: u64,
    /// Offset of the next chunk to fetch.
    next: u64,
    chunk: Vec<u8>,
    at: usize,
    /// Offset of `chunk[at]`.
    pos: u64,
    /// The byte before `pos` was a newline (or `pos` is the file's start).
    line_start: bool,
    phase: Phase,
}

impl<'a> LineRange<'a> {
    /// Opens `range` of the context's file; returns the reader and the offset of its first byte
    /// (the first line's start).
    pub fn open(
        ctx: &'a InputCtx<'a>,
        range: ByteRange,
    ) -> Result<(LineRange<'a>, u64), IngestError> {
        let size = ctx
            .opener
            .size(&ctx.location)
            .map_err(|e| IngestError::io(&ctx.location, e))?;
        let from = range.start.saturating_sub(1).min(size);
        let mut r = LineRange {
            opener: ctx.opener,
            location: ctx.location.clone(),
            counter: ctx.bytes_read.clone(),
            size,
            end: range.end.min(size),
            next: from,
            chunk: Vec::new(),
            at: 0,
            pos: from,
            line_start: true,
            phase: if range.start > 0 {
                Phase::Skip
            } else {
                Phase::Read
            },
        };
        // Drop the partial line now, so the caller knows where the first line starts.
        r.fill_buf()
            .map_err(|e| IngestError::io(&ctx.location, e))?;
        let first = r.pos;
        Ok((r, first))
    }

    /// Fetches the next chunk; `false` at the end of the file.
    fn fetch(&mut self) -> io::Result<bool> {
        if self.next >= self.size {
            return Ok(false);
        }
        let n = CHUNK.min(self.size - self.next);
        self.chunk = self.opener.read_range(&self.location, self.next, n)?;
        self.at = 0;
        if self.chunk.is_empty() {
            // Shorter than its size said.
            self.size = self.next;
            return Ok(false);
        }
        self.next += self.chunk.len() as u64;
        self.counter
            .fetch_add(self.chunk.len() as u64, Ordering::Relaxed);
        Ok(true)
    }
}

impl Read for LineRange<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let avail = self.fill_buf()?;
        let n = avail.len().min(out.len());
        out[..n].copy_from_slice(&avail[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for LineRange<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        loop {
            if self.phase == Phase::Done {
                return Ok(&[]);
            }
            if self.at >= self.chunk.len() && !self.fetch()? {
                self.phase = Phase::Done;
                return Ok(&[]);
            }
            let avail = &self.chunk[self.at..];
            match self.phase {
                Phase::Skip => match memchr(b'\n', avail) {
                    Some(i) => {
                        self.at += i + 1;
                        self.pos += i as u64 + 1;
                        self.line_start = true;
                        self.phase = Phase::Read;
                    }
                    None => {
                        self.pos += avail.len() as u64;
                        self.at = self.chunk.len();
                    }
                },
                Phase::Read if self.pos >= self.end => {
                    self.phase = if self.line_start {
                        Phase::Done
                    } else {
                        Phase::Finish
                    };
                }
                Phase::Read => {
                    let n = avail.len().min((self.end - self.pos) as usize);
                    return Ok(&self.chunk[self.at..self.at + n]);
                }
                Phase::Finish => {
                    let n = memchr(b'\n', avail).map_or(avail.len(), |i| i + 1);
                    return Ok(&self.chunk[self.at..self.at + n]);
                }
                Phase::Done => unreachable!("handled above"),
            }
        }
    }

    fn consume(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.line_start = self.chunk[self.at + n - 1] == b'\n';
        self.at += n;
        self.pos += n as u64;
        if self.phase == Phase::Finish && self.line_start {
            self.phase = Phase::Done;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::spec::FormatOptions;

    /// The text each range of `data` reads, for ranges cut at `cuts`.
    fn pieces(data: &[u8], cuts: &[u64]) -> Vec<(String, u64)> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.nt");
        std::fs::write(&p, data).unwrap();
        let o = FormatOptions::default_for(Format::Freebase);
        let loc = p.to_str().unwrap().to_string();
        let mut bounds = vec![0];
        bounds.extend_from_slice(cuts);
        bounds.push(data.len() as u64);
        bounds
            .windows(2)
            .map(|w| {
                let ctx = InputCtx::local(&loc, &o);
                let (mut r, first) = LineRange::open(&ctx, ByteRange::new(w[0], w[1])).unwrap();
                let mut s = String::new();
                r.read_to_string(&mut s).unwrap();
                (s, first)
            })
            .collect()
    }

    #[test]
    fn every_line_is_read_by_one_range() {
        let data = b"ab\ncde\n\nfg\nh";
        for a in 0..=data.len() as u64 {
            for b in a..=data.len() as u64 {
                let got = pieces(data, &[a, b]);
                let joined: String = got.iter().map(|(s, _)| s.as_str()).collect();
                assert_eq!(joined.as_bytes(), data, "cuts {a} {b}: {got:?}");
                for (s, first) in &got {
                    if !s.is_empty() {
                        let f = *first as usize;
                        assert!(f == 0 || data[f - 1] == b'\n', "{got:?}");
                    }
                }
            }
        }
        // A cut just after a newline starts the next range's first line there.
        assert_eq!(
            pieces(data, &[3]),
            vec![("ab\n".into(), 0), ("cde\n\nfg\nh".into(), 3)]
        );
        // A cut on the newline itself: that line still belongs to the first range.
        assert_eq!(
            pieces(data, &[2]),
            vec![("ab\n".into(), 0), ("cde\n\nfg\nh".into(), 3)]
        );
        assert_eq!(
            pieces(data, &[4]),
            vec![("ab\ncde\n".into(), 0), ("\nfg\nh".into(), 7)]
        );
    }

    #[test]
    fn json_lines_are_told_from_pretty_json() {
        let n = HEAD_BYTES as usize;
        assert!(is_json_lines(b"{\"a\":1}\n{\"a\":2}\n", n));
        assert!(is_json_lines(b"\xEF\xBB\xBF {\"a\":1}", n));
        assert!(!is_json_lines(b"{\n  \"a\": 1\n}\n", n));
        assert!(!is_json_lines(b"{\"a\": 1,\n \"b\": 2}\n", n));
        assert!(!is_json_lines(b"[{\"a\":1}]", n));
        assert!(!is_json_lines(b"", n));
        assert!(is_json_lines(b"{\"a\":\"long", 10));
    }
}
