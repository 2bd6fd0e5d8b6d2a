//! Knowledge-base readers: Freebase RDF, Wikidata JSON, FB15k-237 TSV, MetaQA KB, and the
//! WikiOFGraph text-to-triples pairs ([`wikiofgraph`], JSON lines like the QA readers).
//!
//! The four KG readers are line-oriented (WikiOFGraph is JSON lines, read like the QA files): `ByteLines` reads the decompressed input one line at a time
//! as raw bytes (so invalid UTF-8 is a per-line quarantine, never a failure of the whole file),
//! into one reused buffer, tracking the byte offset and the 1-based number of each line (no
//! number for the lines of a byte range, which cannot know it: see [`crate::ByteRange`]). An I/O
//! error mid-stream (a truncated gzip, bzip2 or zstd file) ends the read: everything before it has
//! been emitted, and `truncated` turns the error into a `truncated_input` quarantine record.

pub mod fb15k;
pub mod freebase;
pub mod metaqa_kb;
pub mod wikidata;
pub mod wikiofgraph;

use std::io::{self, BufRead};

use distillery_core::{QuarantineRecord, Record, RecordSink, SinkError};

use crate::IngestError;
use crate::InputCtx;

/// One line of a [`ByteLines`] reader, without its `\n`, `\r\n` or `\r` terminator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineRef<'a> {
    /// The line; for a line over the reader's limit, only its first bytes (its excerpt).
    pub bytes: &'a [u8],
    /// Byte offset of the line's first byte in the decompressed input.
    pub offset: u64,
    /// 1-based line number; `None` when reading a byte range.
    pub number: Option<u64>,
    /// The whole line's length: more than `bytes.len()` for a line over the limit.
    pub len: u64,
}

impl LineRef<'_> {
    /// Whether the line was over the reader's limit (`bytes` is only its start).
    pub fn oversized(&self) -> bool {
        self.len > self.bytes.len() as u64
    }
}

/// Bytes of an oversized line kept as its excerpt.
pub(crate) const EXCERPT: usize = 512;

/// The UTF-8 byte order mark, skipped at the start of an input.
pub(crate) const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads a `BufRead` line by line into one reused byte buffer (memory: the longest line, at
/// most the limit). Lines end at `\n`, `\r\n` or a lone `\r` (the N-Triples `EOL`); a line
/// over the limit keeps its first [`EXCERPT`] bytes and its length, the rest is read past
/// without being held. A UTF-8 byte order mark at offset 0 is dropped from the first line.
pub(crate) struct ByteLines<R> {
    reader: R,
    buf: Vec<u8>,
    next_offset: u64,
    lines: u64,
    numbered: bool,
    max: usize,
    /// The last line ended with `\r` at the end of a buffer: a `\n` next belongs to it.
    pending_cr: bool,
}

impl<R: BufRead> ByteLines<R> {
    /// Lines of a whole input, numbered from 1.
    pub fn new(reader: R) -> ByteLines<R> {
        ByteLines {
            reader,
            buf: Vec::with_capacity(4096),
            next_offset: 0,
            lines: 0,
            numbered: true,
            max: distillery_core::spec::DEFAULT_MAX_LINE_BYTES as usize,
            pending_cr: false,
        }
    }

    /// Lines of a byte range whose first byte is at `offset` in the file: offsets only.
    pub fn ranged(reader: R, offset: u64) -> ByteLines<R> {
        ByteLines {
            next_offset: offset,
            numbered: false,
            ..ByteLines::new(reader)
        }
    }

    /// The same reader with lines longer than `max` bytes cut to their excerpt.
    pub fn limit(mut self, max: u64) -> ByteLines<R> {
        self.max = usize::try_from(max).unwrap_or(usize::MAX).max(1);
        self
    }

    /// The next line, `Ok(None)` at the end of the input. After an `Err`, [`Self::position`]
    /// says where the input broke; the reader should not be used further.
    pub fn next_line(&mut self) -> io::Result<Option<LineRef<'_>>> {
        self.buf.clear();
        if self.pending_cr {
            let avail = fill(&mut self.reader)?;
            if avail.first() == Some(&b'\n') {
                self.reader.consume(1);
                self.next_offset += 1;
            }
            self.pending_cr = false;
        }
        // The partial line read before an error is dropped (the caller reports the cut at its
        // start), so offsets and counts move only once the line is complete.
        let mut len = 0u64;
        let mut terminator = 0u64;
        let mut any = false;
        loop {
            let avail = fill(&mut self.reader)?;
            if avail.is_empty() {
                break;
            }
            any = true;
            let (take, used, end) = match memchr::memchr2(b'\n', b'\r', avail) {
                Some(i) if avail[i] == b'\r' => match avail.get(i + 1) {
                    Some(b'\n') => (i, i + 2, 2),
                    Some(_) => (i, i + 1, 1),
                    None => {
                        self.pending_cr = true;
                        (i, i + 1, 1)
                    }
                },
                Some(i) => (i, i + 1, 1),
                None => (avail.len(), avail.len(), 0),
            };
            let room = (self.max + 1).saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&avail[..take.min(room)]);
            len += take as u64;
            self.reader.consume(used);
            if end > 0 {
                terminator = end;
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        let offset = self.next_offset;
        self.next_offset += len + terminator;
        self.lines += 1;
        let mut start = 0;
        if offset == 0 && self.buf.starts_with(UTF8_BOM) {
            start = UTF8_BOM.len();
        }
        let bytes = if len > self.max as u64 {
            &self.buf[start
                ..(start + EXCERPT)
                    .min(self.max)
                    .min(self.buf.len())
                    .max(start)]
        } else {
            &self.buf[start..]
        };
        Ok(Some(LineRef {
            bytes,
            offset: offset + start as u64,
            number: self.numbered.then_some(self.lines),
            len: len - start as u64,
        }))
    }

    /// Byte offset and 1-based line number of the next (not yet complete) line.
    pub fn position(&self) -> (u64, Option<u64>) {
        (self.next_offset, self.numbered.then_some(self.lines + 1))
    }
}

/// `fill_buf`, retried when interrupted.
fn fill<R: BufRead>(reader: &mut R) -> io::Result<&[u8]> {
    loop {
        match reader.fill_buf() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Re-borrow: the borrow checker cannot see the loop ends here.
            Ok(_) => return reader.fill_buf(),
            Err(e) => return Err(e),
        }
    }
}

/// The `record_too_large` quarantine record of a line over `limit` bytes (`option` names the
/// reader option to raise).
pub(crate) fn too_large_line(dataset: &str, ctx: &InputCtx<'_>, line: &LineRef<'_>) -> Record {
    let (limit, option) = ctx.options.record_limit();
    let detail = format!(
        "line of {} bytes is over the limit of {limit} bytes; it was read past, not parsed \
         (raise the reader option `{option}` if it is a real record)",
        line.len
    );
    bad_line(dataset, ctx, "record_too_large", detail, line)
}

/// The `truncated_input` quarantine record for an input that failed mid-stream at `offset`
/// (bytes of the decompressed input read before the failure) and `line`.
pub(crate) fn truncated(
    dataset: &str,
    ctx: &InputCtx<'_>,
    err: io::Error,
    offset: u64,
    line: Option<u64>,
) -> Result<Record, IngestError> {
    if !crate::input::is_data_error(&err) {
        // Not bad data but a failed read (network, disk): the whole input fails, so a partial
        // KB is never published as if the file ended there.
        return Err(IngestError::io(&ctx.location, err));
    }
    let q = QuarantineRecord::new(
        dataset,
        &ctx.location,
        "truncated_input",
        err.to_string(),
        b"",
    )
    .at_byte(offset);
    Ok(Record::Quarantine(match line {
        Some(l) => q.at_line(l),
        None => q,
    }))
}

/// A quarantine record for one bad line, with the raw line as its excerpt.
pub(crate) fn bad_line(
    dataset: &str,
    ctx: &InputCtx<'_>,
    reason: &str,
    detail: impl Into<String>,
    line: &LineRef<'_>,
) -> Record {
    let q = QuarantineRecord::new(dataset, &ctx.location, reason, detail, line.bytes);
    let q = match line.number {
        Some(n) => q.at_line(n),
        None => q,
    };
    Record::Quarantine(q.at_byte(line.offset))
}

/// The line as UTF-8; `None` when it is not, after emitting its `invalid_utf8` quarantine
/// record, or when it was over the limit, after emitting its `record_too_large` one.
pub(crate) fn utf8_line<'a>(
    dataset: &str,
    ctx: &InputCtx<'_>,
    line: &LineRef<'a>,
    sink: &mut dyn RecordSink,
) -> Result<Option<&'a str>, SinkError> {
    if line.oversized() {
        sink.emit(too_large_line(dataset, ctx, line))?;
        return Ok(None);
    }
    match std::str::from_utf8(line.bytes) {
        Ok(text) => Ok(Some(text)),
        Err(e) => {
            let detail = format!("invalid UTF-8 at byte {} of the line", e.valid_up_to());
            sink.emit(bad_line(dataset, ctx, "invalid_utf8", detail, line))?;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_offsets_numbers_and_no_terminators() {
        let mut l = ByteLines::new(&b"ab\r\n\ncd"[..]);
        let a = l.next_line().unwrap().unwrap();
        assert_eq!((a.bytes, a.offset, a.number), (&b"ab"[..], 0, Some(1)));
        let b = l.next_line().unwrap().unwrap();
        assert_eq!((b.bytes, b.offset, b.number), (&b""[..], 4, Some(2)));
        let c = l.next_line().unwrap().unwrap();
        assert_eq!((c.bytes, c.offset, c.number), (&b"cd"[..], 5, Some(3)));
        assert!(l.next_line().unwrap().is_none());
        assert_eq!(l.position(), (7, Some(4)));
        let mut r = ByteLines::ranged(
            &b"x
y"[..],
            100,
        );
        let x = r.next_line().unwrap().unwrap();
        assert_eq!((x.offset, x.number), (100, None));
        assert_eq!(r.next_line().unwrap().unwrap().offset, 102);
        assert_eq!(r.position(), (103, None));
    }
}
