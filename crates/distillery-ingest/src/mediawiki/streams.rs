//! Finding the bz2 streams of a multistream dump in its compressed bytes.
//!
//! Wikipedia's `pages-articles-multistream.xml.bz2` is a concatenation of independent bz2
//! streams: the first holds `<mediawiki>` and `<siteinfo>`, each of the next ~100 `<page>`s,
//! the last `</mediawiki>`. A stream starts byte-aligned with `BZh[1-9]` followed by the
//! block magic `1AY&SY` (0x314159265359), or by the end-of-stream magic (0x177245385090) for an
//! empty stream. [`Scanner`] finds candidates by scanning the compressed bytes (read with
//! [`crate::Opener::read_range`] in 4 MiB chunks) and cuts the file, or a byte range of it,
//! into streams; the decoder verifies them (a stream must decode to its end exactly at the next
//! candidate). [`first_start_from`] finds one start, for planning cuts and ending ranges.

use std::io;

use memchr::memmem;

use crate::Opener;

const CHUNK: u64 = 4 << 20;
/// A stream with more compressed bytes than this is not a multistream dump's stream.
pub(crate) const MAX_STREAM: usize = 64 << 20;
const BLOCK_MAGIC: [u8; 6] = [0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
const EOS_MAGIC: [u8; 6] = [0x17, 0x72, 0x45, 0x38, 0x50, 0x90];

/// The first candidate stream start at or after `from`, if one is complete in `buf`.
pub(crate) fn find_stream_start(buf: &[u8], from: usize) -> Option<usize> {
    let mut pos = from;
    while pos < buf.len() {
        let i = pos + memmem::find(&buf[pos..], b"BZh")?;
        if i + 10 > buf.len() {
            return None;
        }
        if (b'1'..=b'9').contains(&buf[i + 3])
            && (buf[i + 4..i + 10] == BLOCK_MAGIC || buf[i + 4..i + 10] == EOS_MAGIC)
        {
            return Some(i);
        }
        pos = i + 1;
    }
    None
}

/// The first candidate stream start in `[from, from + limit)` of a location (clipped to
/// `size`), scanning 1 MiB reads; `None` when there is none.
pub(crate) fn first_start_from(
    opener: &dyn Opener,
    location: &str,
    from: u64,
    size: u64,
    limit: u64,
) -> io::Result<Option<u64>> {
    let end = size.min(from.saturating_add(limit));
    let mut buf: Vec<u8> = Vec::new();
    let (mut buf_start, mut pos) = (from, from);
    // Candidates in `buf` start at `buf_start` or later.
    while buf_start < end && pos < size {
        let data = opener.read_range(location, pos, (1 << 20).min(size - pos))?;
        if data.is_empty() {
            break;
        }
        pos += data.len() as u64;
        buf.extend_from_slice(&data);
        if let Some(i) = find_stream_start(&buf, 0) {
            let at = buf_start + i as u64;
            return Ok((at < end).then_some(at));
        }
        // Keep the tail that may hold the beginning of a start.
        let keep = buf.len().saturating_sub(9);
        buf.drain(..keep);
        buf_start += keep as u64;
    }
    Ok(None)
}

/// One compressed stream.
pub(super) struct Stream {
    pub offset: u64,
    pub data: Vec<u8>,
    /// No stream follows.
    pub last: bool,
}

pub(super) enum ScanError {
    /// The stream at this offset is too large for a multistream dump.
    TooLarge(u64),
    Io(u64, io::Error),
}

impl ScanError {
    /// Where the scan stopped: the start of the stream it could not delimit.
    pub(super) fn offset(&self) -> u64 {
        match self {
            ScanError::TooLarge(o) | ScanError::Io(o, _) => *o,
        }
    }
}

/// Cuts the compressed file into streams at candidate starts.
pub(super) struct Scanner<'a> {
    opener: &'a dyn Opener,
    location: &'a str,
    size: u64,
    /// Next offset to read.
    pos: u64,
    buf: Vec<u8>,
    /// Offset of `buf[0]`, the start of the current stream.
    buf_start: u64,
    scan: usize,
    /// Looking for the first stream start at or after `buf_start` (a byte range's first).
    seeking: bool,
    /// Streams starting at or after this offset are not yielded.
    stop: u64,
}

impl<'a> Scanner<'a> {
    /// The streams of a file that starts with one.
    pub(super) fn from_start(opener: &'a dyn Opener, location: &'a str, size: u64) -> Self {
        Scanner {
            opener,
            location,
            size,
            pos: 0,
            buf: Vec::new(),
            buf_start: 0,
            scan: 1,
            seeking: false,
            stop: u64::MAX,
        }
    }

    /// The streams that start in `[from, stop)`; the last one is read to its end, past `stop`.
    pub(super) fn range(
        opener: &'a dyn Opener,
        location: &'a str,
        size: u64,
        from: u64,
        stop: u64,
    ) -> Self {
        Scanner {
            pos: from,
            buf_start: from,
            seeking: true,
            stop,
            ..Scanner::from_start(opener, location, size)
        }
    }

    /// Reads the next chunk into `buf`.
    fn read_chunk(&mut self) -> Result<(), ScanError> {
        let n = CHUNK.min(self.size - self.pos);
        let data = self
            .opener
            .read_range(self.location, self.pos, n)
            .map_err(|e| ScanError::Io(self.buf_start, e))?;
        if data.is_empty() {
            // The file is shorter than its size said.
            self.size = self.pos;
        } else {
            self.pos += data.len() as u64;
            self.buf.extend_from_slice(&data);
        }
        Ok(())
    }

    pub(super) fn next_stream(&mut self) -> Result<Option<Stream>, ScanError> {
        loop {
            if self.seeking {
                if let Some(i) = find_stream_start(&self.buf, 0) {
                    self.buf.drain(..i);
                    self.buf_start += i as u64;
                    self.seeking = false;
                    self.scan = 1;
                } else {
                    // Keep the tail that may hold the beginning of a start.
                    let keep = self.buf.len().saturating_sub(9);
                    self.buf.drain(..keep);
                    self.buf_start += keep as u64;
                    if self.pos >= self.size || self.buf_start >= self.stop {
                        return Ok(None);
                    }
                    self.read_chunk()?;
                    continue;
                }
            }
            if self.buf_start >= self.stop {
                return Ok(None);
            }
            if let Some(i) = find_stream_start(&self.buf, self.scan.max(1)) {
                let data: Vec<u8> = self.buf.drain(..i).collect();
                let offset = self.buf_start;
                self.buf_start += i as u64;
                self.scan = 1;
                return Ok(Some(Stream {
                    offset,
                    data,
                    last: false,
                }));
            }
            self.scan = self.buf.len().saturating_sub(9).max(1);
            if self.pos >= self.size {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let data = std::mem::take(&mut self.buf);
                let offset = self.buf_start;
                self.buf_start += data.len() as u64;
                return Ok(Some(Stream {
                    offset,
                    data,
                    last: true,
                }));
            }
            if self.buf.len() > MAX_STREAM {
                return Err(ScanError::TooLarge(self.buf_start));
            }
            self.read_chunk()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn bz(data: &[u8]) -> Vec<u8> {
        let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn finds_stream_starts() {
        let a = bz(b"hello");
        let b = bz(b"");
        let mut all = a.clone();
        all.extend_from_slice(&b);
        all.extend_from_slice(&bz(b"world"));
        assert_eq!(find_stream_start(&all, 0), Some(0));
        assert_eq!(find_stream_start(&all, 1), Some(a.len()));
        assert_eq!(
            find_stream_start(&all, a.len() + 1),
            Some(a.len() + b.len())
        );
        assert_eq!(find_stream_start(&all, a.len() + b.len() + 1), None);
        assert_eq!(find_stream_start(b"BZh9", 0), None);
    }
}
