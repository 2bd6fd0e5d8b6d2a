//! Parallel decoding of multistream bz2 dumps.
//!
//! Wikipedia's `pages-articles-multistream.xml.bz2` is a concatenation of independent bz2
//! streams: the first holds `<mediawiki>` and `<siteinfo>`, each of the next ~100 `<page>`s,
//! the last `</mediawiki>`. A stream starts byte-aligned with `BZh[1-9]` followed by the
//! block magic `1AY&SY` (0x314159265359), or by the end-of-stream magic (0x177245385090) for an
//! empty stream. Candidates are found by scanning the compressed bytes (read with
//! [`crate::Opener::read_range`] in 4 MiB chunks) and verified by decoding: a stream must
//! decode to its end exactly at the next candidate.
//!
//! One producer thread cuts the file into streams; `available_parallelism()` workers decode
//! each stream and turn its pages into records; the calling thread emits the results in stream
//! order. A window of in-flight streams (twice the workers) bounds memory: the producer takes a
//! token per stream and the emitter returns it once the stream is written. Offsets and page
//! indexes of quarantine records are made absolute at emission, so the output is identical to
//! sequential reading.
//!
//! Anything unexpected falls back to sequential reading from the first stream not yet emitted:
//! a stream that does not decode (a false candidate, a cut or corrupt file), a fragment that
//! ends inside a page, a stream over 64 MiB compressed. A file with a single stream is read
//! sequentially from the start.

use std::collections::BTreeMap;
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use distillery_core::RecordSink;
use memchr::memmem;

use super::xml::{PageSplitter, SplitEnd};
use super::{Base, Item, PageCtx, RootState, emit_items, finish, process_split, read_sequential};
use crate::{IngestError, InputCtx, Opener};

const CHUNK: u64 = 4 << 20;
/// A stream with more compressed bytes than this is not a multistream dump's stream.
const MAX_STREAM: usize = 64 << 20;
/// Most decompressed bytes of one stream.
const MAX_FRAGMENT: u64 = 1 << 30;
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

/// One compressed stream.
struct Stream {
    offset: u64,
    data: Vec<u8>,
    /// No stream follows.
    last: bool,
}

enum ScanError {
    /// The stream at this offset is too large for a multistream dump.
    TooLarge(u64),
    Io(u64, io::Error),
}

/// Cuts the compressed file into streams at candidate starts.
struct Scanner<'a> {
    opener: &'a dyn Opener,
    location: &'a str,
    size: u64,
    /// Next offset to read.
    pos: u64,
    buf: Vec<u8>,
    /// Offset of `buf[0]`, the start of the current stream.
    buf_start: u64,
    scan: usize,
}

impl Scanner<'_> {
    fn next_stream(&mut self) -> Result<Option<Stream>, ScanError> {
        loop {
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
            let n = CHUNK.min(self.size - self.pos);
            let data = self
                .opener
                .read_range(self.location, self.pos, n)
                .map_err(|e| ScanError::Io(self.buf_start, e))?;
            if data.is_empty() {
                // The file is shorter than its size said.
                self.size = self.pos;
                continue;
            }
            self.pos += data.len() as u64;
            self.buf.extend_from_slice(&data);
        }
    }
}

/// A decoded stream's records.
struct Fragment {
    items: Vec<Item>,
    end: SplitEnd,
    compressed: u64,
}

enum Outcome {
    Done(Box<Fragment>),
    /// Read sequentially from this compressed offset on.
    Fallback(u64),
}

fn decode(stream: &Stream, pctx: &PageCtx) -> Outcome {
    let fail = Outcome::Fallback(stream.offset);
    let mut dec = bzip2::read::BzDecoder::new(stream.data.as_slice());
    let mut xml = Vec::new();
    if (&mut dec)
        .take(MAX_FRAGMENT + 1)
        .read_to_end(&mut xml)
        .is_err()
        || xml.len() as u64 > MAX_FRAGMENT
        || dec.total_in() != stream.data.len() as u64
    {
        return fail;
    }
    let mut items = Vec::new();
    let mut splitter = PageSplitter::new();
    let fed = splitter.feed::<()>(&xml, &mut |split| {
        items.extend(process_split(split, pctx));
        Ok(())
    });
    let end = splitter.finish();
    if fed.is_err() || end.open_page.is_some() {
        return fail;
    }
    Outcome::Done(Box::new(Fragment {
        items,
        end,
        compressed: stream.data.len() as u64,
    }))
}

/// A `Read` over a byte range of a location, through `read_range`, counting what it reads.
struct RangeReader<'a> {
    ctx: &'a InputCtx<'a>,
    pos: u64,
    end: u64,
    chunk: Vec<u8>,
    at: usize,
}

impl Read for RangeReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at >= self.chunk.len() {
            if self.pos >= self.end {
                return Ok(0);
            }
            let n = (1 << 20).min(self.end - self.pos);
            self.chunk = self
                .ctx
                .opener
                .read_range(&self.ctx.location, self.pos, n)?;
            self.at = 0;
            if self.chunk.is_empty() {
                self.end = self.pos;
                return Ok(0);
            }
            self.pos += self.chunk.len() as u64;
            self.ctx
                .bytes_read
                .fetch_add(self.chunk.len() as u64, Ordering::Relaxed);
        }
        let n = out.len().min(self.chunk.len() - self.at);
        out[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Reads a multistream bz2 input in parallel. Returns `false`, having emitted nothing, when the
/// input is not a bz2 file with more than one stream.
pub(crate) fn read(
    ctx: &InputCtx<'_>,
    pctx: &PageCtx,
    sink: &mut dyn RecordSink,
) -> Result<bool, IngestError> {
    let Ok(size) = ctx.opener.size(&ctx.location) else {
        return Ok(false);
    };
    if size < 14 {
        return Ok(false);
    }
    match ctx.opener.read_range(&ctx.location, 0, 4) {
        Ok(h) if h.len() == 4 && h.starts_with(b"BZh") && (b'1'..=b'9').contains(&h[3]) => {}
        _ => return Ok(false),
    }
    let mut scanner = Scanner {
        opener: ctx.opener,
        location: &ctx.location,
        size,
        pos: 0,
        buf: Vec::new(),
        buf_start: 0,
        scan: 1,
    };
    let first = match scanner.next_stream() {
        Ok(Some(s)) if !s.last => s,
        _ => return Ok(false),
    };
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(1);
    let window = 2 * workers;
    tracing::debug!(location = %ctx.location, workers, "mediawiki multistream: parallel decoding");

    let mut base = Base::default();
    let mut roots = RootState::default();
    let stop = AtomicBool::new(false);
    let result: Result<Option<u64>, IngestError> = std::thread::scope(|s| {
        let (job_tx, job_rx) = mpsc::sync_channel::<(u64, Stream)>(window);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (res_tx, res_rx) = mpsc::channel::<(u64, Outcome)>();
        let (tok_tx, tok_rx) = mpsc::sync_channel::<()>(window);
        for _ in 0..window {
            let _ = tok_tx.send(());
        }
        let stop = &stop;
        // Producer.
        {
            let res_tx = res_tx.clone();
            let mut scanner = scanner;
            s.spawn(move || {
                let mut next = Some(first);
                let mut index = 0u64;
                while let Some(stream) = next.take() {
                    if tok_rx.recv().is_err() || stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let last = stream.last;
                    if job_tx.send((index, stream)).is_err() {
                        return;
                    }
                    index += 1;
                    if last {
                        return;
                    }
                    match scanner.next_stream() {
                        Ok(s) => next = s,
                        Err(ScanError::TooLarge(offset)) => {
                            let _ = res_tx.send((index, Outcome::Fallback(offset)));
                            return;
                        }
                        Err(ScanError::Io(offset, e)) => {
                            tracing::debug!(offset, error = %e, "mediawiki multistream: read failed");
                            let _ = res_tx.send((index, Outcome::Fallback(offset)));
                            return;
                        }
                    }
                }
            });
        }
        // Workers.
        for _ in 0..workers {
            let job_rx = Arc::clone(&job_rx);
            let res_tx = res_tx.clone();
            s.spawn(move || {
                loop {
                    let job = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok((index, stream)) = job else {
                        return;
                    };
                    let outcome = if stop.load(Ordering::Relaxed) {
                        Outcome::Fallback(stream.offset)
                    } else {
                        decode(&stream, pctx)
                    };
                    if res_tx.send((index, outcome)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(res_tx);
        // Emitter: this thread, in stream order.
        let mut waiting: BTreeMap<u64, Outcome> = BTreeMap::new();
        let mut next = 0u64;
        let mut result = Ok(None);
        'recv: for (index, outcome) in res_rx.iter() {
            waiting.insert(index, outcome);
            while let Some(outcome) = waiting.remove(&next) {
                match outcome {
                    Outcome::Done(frag) => {
                        if let Err(e) = emit_items(frag.items, base, pctx, sink) {
                            result = Err(e);
                            break 'recv;
                        }
                        base.offset += frag.end.bytes;
                        base.page += frag.end.pages;
                        roots.merge(&frag.end);
                        ctx.bytes_read.fetch_add(frag.compressed, Ordering::Relaxed);
                        next += 1;
                        let _ = tok_tx.send(());
                    }
                    Outcome::Fallback(offset) => {
                        result = Ok(Some(offset));
                        break 'recv;
                    }
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        drop(tok_tx);
        drop(res_rx);
        result
    });

    match result? {
        None => {
            let end = SplitEnd {
                bytes: 0,
                ..Default::default()
            };
            finish(end, None, base, roots, pctx, sink)?;
        }
        Some(offset) => {
            tracing::debug!(location = %ctx.location, offset, "mediawiki multistream: sequential from here");
            let range = RangeReader {
                ctx,
                pos: offset,
                end: size,
                chunk: Vec::new(),
                at: 0,
            };
            let decoder =
                bzip2::read::MultiBzDecoder::new(BufReader::with_capacity(1 << 16, range));
            let mut reader = BufReader::with_capacity(1 << 16, decoder);
            read_sequential(&mut reader, base, roots, pctx, sink)?;
        }
    }
    Ok(true)
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
