//! Knowledge-base readers: Freebase RDF, Wikidata JSON, FB15k-237 TSV, MetaQA KB, and the
//! WikiOFGraph text-to-triples pairs ([`wikiofgraph`], JSON lines like the QA readers).
//!
//! The four KG readers are line-oriented (WikiOFGraph is JSON lines, read like the QA files): `ByteLines` reads the decompressed input one line at a time
//! as raw bytes (so invalid UTF-8 is a per-line quarantine, never a failure of the whole file),
//! into one reused buffer, tracking the byte offset and the 1-based number of each line (no
//! number for the lines of a byte range, which cannot know it: see [`crate::ByteRange`]). An I/O
//! error mid-stream (a truncated gzip or bzip2 file) ends the read: everything before it has
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

/// One line of a [`ByteLines`] reader, without its `\n` / `\r\n` terminator.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineRef<'a> {
    pub bytes: &'a [u8],
    /// Byte offset of the line's first byte in the decompressed input.
    pub offset: u64,
    /// 1-based line number; `None` when reading a byte range.
    pub number: Option<u64>,
}

/// Reads a `BufRead` line by line into one reused byte buffer (memory: the longest line).
pub(crate) struct ByteLines<R> {
    reader: R,
    buf: Vec<u8>,
    next_offset: u64,
    lines: u64,
    numbered: bool,
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

    /// The next line, `Ok(None)` at the end of the input. After an `Err`, [`Self::position`]
    /// says where the input broke; the reader should not be used further.
    pub fn next_line(&mut self) -> io::Result<Option<LineRef<'_>>> {
        self.buf.clear();
        // `read_until` scans with memchr and keeps the bytes read before an error in `buf`;
        // the partial line is dropped (the caller reports the cut at its start).
        let n = self.reader.read_until(b'\n', &mut self.buf)?;
        if n == 0 {
            return Ok(None);
        }
        let offset = self.next_offset;
        self.next_offset += n as u64;
        self.lines += 1;
        let mut end = self.buf.len();
        if end > 0 && self.buf[end - 1] == b'\n' {
            end -= 1;
        }
        if end > 0 && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        Ok(Some(LineRef {
            bytes: &self.buf[..end],
            offset,
            number: self.numbered.then_some(self.lines),
        }))
    }

    /// Byte offset and 1-based line number of the next (not yet complete) line.
    pub fn position(&self) -> (u64, Option<u64>) {
        (self.next_offset, self.numbered.then_some(self.lines + 1))
    }
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
/// record.
pub(crate) fn utf8_line<'a>(
    dataset: &str,
    ctx: &InputCtx<'_>,
    line: &LineRef<'a>,
    sink: &mut dyn RecordSink,
) -> Result<Option<&'a str>, SinkError> {
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
