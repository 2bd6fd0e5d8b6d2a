//! Decompression on one thread, parsing on the others, for line inputs that cannot be split
//! into byte ranges (a single-stream gzip, bzip2 or zstd Freebase or Wikidata dump).
//!
//! A cutter thread pulls the decompressed bytes, cuts them into chunks of whole lines (about
//! 4 MiB each) and places each chunk in the input (offset of its first byte, number of its first
//! line). A pool of parser threads turns chunks into the reader's output; the calling thread
//! hands the outputs over in chunk order, so the records come out exactly as a sequential read
//! gives them, line numbers and offsets included. A window of chunks in flight (eight per
//! parser) bounds memory: the cutter takes a token per chunk and the caller gives it back once
//! that chunk's output is handed over. A wider window lets the parsers run ahead while the
//! part writer compresses a row group (20M Freebase lines on two cores: 12.0 s at two chunks
//! per parser, 11.2 s at eight, no better at sixteen; docs/benchmarks.md).
//!
//! For a sink that shards (the executor's), the parsers also group their records per
//! (table, shard) and convert them to Arrow ([`Parsed`]), so the calling thread only forwards
//! batches: left to it, that work made it the pipeline's slowest stage on two cores.
//!
//! A decompression error ends the input as in a sequential read with `ByteLines`: every
//! complete line before it is parsed and handed over, the partial line after the last newline
//! is dropped, and [`run`] returns where it started.

use std::collections::BTreeMap;
use std::io::{self, BufRead};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use distillery_core::sharded::{ShardedBatches, ShardedBuilder};
use distillery_core::{QuarantineRecord, Record, RecordSink, SinkError, Triple};
use memchr::{memchr2, memchr2_iter, memrchr2};

use crate::IngestError;
use crate::kb::{EXCERPT, LineRef, UTF8_BOM};

/// Decompressed bytes per chunk (more when a line is longer). Each chunk's rows reach the part
/// writers as one batch per (table, shard): 4 MiB chunks made a two-core Freebase ingest some
/// 4% faster than 1 MiB ones, with the same rows in every part (docs/benchmarks.md).
const CHUNK: usize = 4 << 20;

/// A run of whole lines of the decompressed input, or one line over the limit.
#[derive(Debug)]
pub(crate) struct LineChunk {
    /// The lines; for an oversized line, its excerpt.
    pub bytes: Vec<u8>,
    /// Offset of `bytes[0]` in the decompressed input.
    pub offset: u64,
    /// 1-based number of the first line.
    pub first_line: u64,
    /// `Some(length)` when the chunk is one line over the limit, of which `bytes` holds the
    /// first bytes only.
    pub oversized: Option<u64>,
    /// The line limit: a longer line of `bytes` is given as its excerpt and length.
    pub max_line: usize,
}

impl LineChunk {
    /// The chunk's lines without their `\n`, `\r\n` or `\r` terminators, as `ByteLines`
    /// gives them (a UTF-8 byte order mark at offset 0 dropped).
    pub fn lines(&self) -> impl Iterator<Item = LineRef<'_>> {
        let mut start = 0usize;
        let mut number = self.first_line;
        if self.offset == 0 && self.bytes.starts_with(UTF8_BOM) {
            start = UTF8_BOM.len();
        }
        let oversized = self.oversized;
        std::iter::from_fn(move || {
            if let Some(len) = oversized {
                if start == usize::MAX {
                    return None;
                }
                let r = LineRef {
                    bytes: &self.bytes[start.min(self.bytes.len())..],
                    offset: self.offset + start as u64,
                    number: Some(number),
                    len: len - start as u64,
                };
                start = usize::MAX;
                return Some(r);
            }
            if start >= self.bytes.len() {
                return None;
            }
            let rest = &self.bytes[start..];
            let (len, next) = match memchr2(b'\n', b'\r', rest) {
                Some(i) if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') => {
                    (i, start + i + 2)
                }
                Some(i) => (i, start + i + 1),
                None => (rest.len(), self.bytes.len()),
            };
            let line = match len > self.max_line {
                true => &rest[..EXCERPT.min(self.max_line)],
                false => &rest[..len],
            };
            let r = LineRef {
                bytes: line,
                offset: self.offset + start as u64,
                number: Some(number),
                len: len as u64,
            };
            start = next;
            number += 1;
            Some(r)
        })
    }
}

/// Number of line ends in `bytes`: `\n`, `\r\n` and lone `\r` (a chunk never ends between
/// the two bytes of a `\r\n`).
fn count_lines(bytes: &[u8]) -> u64 {
    let mut n = 0;
    for i in memchr2_iter(b'\n', b'\r', bytes) {
        if !(bytes[i] == b'\n' && i > 0 && bytes[i - 1] == b'\r') {
            n += 1;
        }
    }
    n
}

/// Where a buffer of whole lines ends: after its last line end, but never between a `\r` at
/// the very end and the `\n` that may follow it (unless the input ended).
fn cut_point(buf: &[u8], eof: bool) -> usize {
    match buf.last() {
        None => 0,
        Some(_) if eof => buf.len(),
        Some(b'\n') => buf.len(),
        Some(_) => memrchr2(b'\n', b'\r', &buf[..buf.len() - 1]).map_or(0, |i| i + 1),
    }
}

/// What a parser thread hands over: its records, or, when the sink shards
/// ([`RecordSink::shards`]), the batches it built from them, so that the calling thread, which
/// hands everything over in order, does not also hash, move and convert every record.
pub(crate) enum Parsed {
    Records(Vec<Record>),
    Batches(ShardedBatches),
}

/// A parser thread's sink for one chunk: the records as they come, or, for a sink that shards,
/// straight into their (table, shard) batches ([`ShardedBuilder`]). [`ChunkSink::finish`]
/// gives the [`Parsed`] to hand over.
pub(crate) enum ChunkSink {
    Records(Vec<Record>),
    Batches(ShardedBuilder),
}

impl ChunkSink {
    /// The sink for `shards` ([`RecordSink::shards`] of the sink the chunk goes to).
    pub fn new(shards: Option<u32>) -> ChunkSink {
        match shards {
            Some(n) => ChunkSink::Batches(ShardedBuilder::new(n)),
            None => ChunkSink::Records(Vec::new()),
        }
    }

    pub fn finish(self) -> Result<Parsed, IngestError> {
        Ok(match self {
            ChunkSink::Records(r) => Parsed::Records(r),
            ChunkSink::Batches(b) => {
                Parsed::Batches(b.finish().map_err(|e| SinkError(e.to_string()))?)
            }
        })
    }
}

impl RecordSink for ChunkSink {
    fn emit(&mut self, record: Record) -> Result<(), SinkError> {
        match self {
            ChunkSink::Records(r) => r.push(record),
            ChunkSink::Batches(b) => b.push(record),
        }
        Ok(())
    }

    fn emit_edge(&mut self, t: &Triple) -> Result<(), SinkError> {
        match self {
            ChunkSink::Records(r) => r.push(Record::edge(t.clone())),
            ChunkSink::Batches(b) => b.push_edge(t),
        }
        Ok(())
    }
}

impl Parsed {
    /// Applies `f` to each quarantine record (to make a chunk's record indexes absolute).
    pub fn map_quarantine(&mut self, mut f: impl FnMut(QuarantineRecord) -> QuarantineRecord) {
        let records = match self {
            Parsed::Records(r) => r,
            Parsed::Batches(b) => &mut b.quarantine,
        };
        for r in records.iter_mut() {
            if let Record::Quarantine(q) = r {
                *q = f(std::mem::take(q));
            }
        }
    }

    /// Hands everything to `sink`, in order.
    pub fn emit(self, sink: &mut dyn RecordSink) -> Result<(), SinkError> {
        match self {
            Parsed::Records(records) => records.into_iter().try_for_each(|r| sink.emit(r)),
            Parsed::Batches(b) => sink.emit_batches(b),
        }
    }
}

/// Where the decompressed input broke: the error, and the offset and line number of the
/// partial line it cut.
#[derive(Debug)]
pub(crate) struct Cut {
    pub error: io::Error,
    pub offset: u64,
    pub line: u64,
}

/// Parser threads for one reader: one per core, none on a single core (read sequentially
/// then). The cutter's inflate is a tenth of the work of a Freebase line, and the parsers
/// also build the batches (see [`Parsed`]), so leaving its core idle would leave it idle most
/// of the time.
pub(crate) fn parsers() -> usize {
    match std::thread::available_parallelism().map_or(1, |n| n.get()) {
        1 => 0,
        n => n,
    }
}

/// Reads `reader` to its end on a cutter thread, runs `parse` on each chunk on `parsers`
/// threads (at least one), and hands the outputs to `emit` in input order on this thread.
/// Returns the cut when the input broke (see the module docs); an `emit` error stops
/// everything and is returned.
pub(crate) fn run<T, P, E>(
    reader: &mut (dyn BufRead + Send),
    parsers: usize,
    max_line: u64,
    parse: P,
    mut emit: E,
) -> Result<Option<Cut>, IngestError>
where
    T: Send,
    P: Fn(LineChunk) -> T + Sync,
    E: FnMut(T) -> Result<(), IngestError>,
{
    let parsers = parsers.max(1);
    let window = 8 * parsers;
    let stop = AtomicBool::new(false);
    let (job_tx, job_rx) = mpsc::sync_channel::<(u64, LineChunk)>(window);
    let job_rx = Mutex::new(job_rx);
    std::thread::scope(|s| {
        let (res_tx, res_rx) = mpsc::channel::<(u64, T)>();
        let (tok_tx, tok_rx) = mpsc::sync_channel::<()>(window);
        for _ in 0..window {
            let _ = tok_tx.send(());
        }
        let stop = &stop;
        let cutter = s.spawn(move || cut_chunks(reader, max_line, &tok_rx, &job_tx, stop));
        for _ in 0..parsers {
            let (job_rx, res_tx, parse) = (&job_rx, res_tx.clone(), &parse);
            s.spawn(move || {
                loop {
                    let job = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok((index, chunk)) = job else {
                        return;
                    };
                    if res_tx.send((index, parse(chunk))).is_err() {
                        return;
                    }
                }
            });
        }
        drop(res_tx);
        let mut waiting: BTreeMap<u64, T> = BTreeMap::new();
        let mut next = 0u64;
        let mut result = Ok(());
        'recv: for (index, out) in res_rx.iter() {
            waiting.insert(index, out);
            while let Some(out) = waiting.remove(&next) {
                if let Err(e) = emit(out) {
                    result = Err(e);
                    break 'recv;
                }
                next += 1;
                let _ = tok_tx.send(());
            }
        }
        // On an error: the cutter stops at its next token, the parsers when their results
        // cannot be sent. No send blocks: at most `window` chunks are ever queued.
        stop.store(true, Ordering::Relaxed);
        drop(tok_tx);
        drop(res_rx);
        let cut = match cutter.join() {
            Ok(cut) => cut,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        result.map(|()| cut)
    })
}

/// The cutter: reads the input into chunks of whole lines and queues them. A line over
/// `max_line` goes alone in a chunk holding its excerpt and length, and is read past without
/// being held.
fn cut_chunks(
    reader: &mut (dyn BufRead + Send),
    max_line: u64,
    tokens: &mpsc::Receiver<()>,
    jobs: &mpsc::SyncSender<(u64, LineChunk)>,
    stop: &AtomicBool,
) -> Option<Cut> {
    let max_line = usize::try_from(max_line).unwrap_or(usize::MAX).max(1);
    let mut carry: Vec<u8> = Vec::new();
    let (mut offset, mut line, mut index) = (0u64, 1u64, 0u64);
    // Queues a chunk; false when the consumer is gone.
    let mut send = |chunk: LineChunk| -> bool {
        if tokens.recv().is_err() || stop.load(Ordering::Relaxed) {
            return false;
        }
        if jobs.send((index, chunk)).is_err() {
            return false;
        }
        index += 1;
        true
    };
    loop {
        let mut buf = std::mem::take(&mut carry);
        buf.reserve(CHUNK + (1 << 16));
        // Where the last (incomplete) line of `buf` starts.
        let mut tail = memrchr2(b'\n', b'\r', &buf).map_or(0, |i| i + 1);
        let mut eof = false;
        let mut failure = None;
        let mut long = false;
        loop {
            if buf.len() >= CHUNK && tail > 0 && cut_point(&buf, false) > 0 {
                break;
            }
            if buf.len() - tail > max_line {
                long = true;
                break;
            }
            match reader.fill_buf() {
                Ok([]) => {
                    eof = true;
                    break;
                }
                Ok(b) => {
                    let n = b.len();
                    let at = buf.len();
                    buf.extend_from_slice(b);
                    reader.consume(n);
                    if let Some(i) = memrchr2(b'\n', b'\r', &buf[at..]) {
                        tail = at + i + 1;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let cut = if long { tail } else { cut_point(&buf, eof) };
        carry = buf.split_off(cut);
        if !buf.is_empty() {
            let (len, lines) = (buf.len() as u64, count_lines(&buf));
            let chunk = LineChunk {
                bytes: buf,
                offset,
                first_line: line,
                oversized: None,
                max_line,
            };
            if !send(chunk) {
                return None;
            }
            offset += len;
            line += lines;
        }
        if long {
            // `carry` is the start of a line over the limit: keep its excerpt, read past it.
            let mut excerpt = std::mem::take(&mut carry);
            let mut len = excerpt.len() as u64;
            excerpt.truncate(EXCERPT.min(max_line));
            excerpt.shrink_to_fit();
            let (terminator, failed) = skip_line(reader, &mut len);
            let chunk = LineChunk {
                bytes: excerpt,
                offset,
                first_line: line,
                oversized: Some(len),
                max_line,
            };
            if let Some(error) = failed {
                // The line is cut: like any partial last line, it is dropped.
                return Some(Cut {
                    error,
                    offset,
                    line,
                });
            }
            if !send(chunk) {
                return None;
            }
            offset += len + terminator;
            line += 1;
            if terminator == 0 {
                return None;
            }
            continue;
        }
        if let Some(error) = failure {
            return Some(Cut {
                error,
                offset,
                line,
            });
        }
        if eof {
            return None;
        }
    }
}

/// Reads past the rest of a line, adding its bytes to `len`; returns the bytes of its
/// terminator (0 at the end of the input) and the read error that cut it, if any.
pub(crate) fn skip_line(reader: &mut dyn BufRead, len: &mut u64) -> (u64, Option<io::Error>) {
    loop {
        let avail = match reader.fill_buf() {
            Ok([]) => return (0, None),
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return (0, Some(e)),
        };
        match memchr2(b'\n', b'\r', avail) {
            Some(i) => {
                let cr = avail[i] == b'\r';
                *len += i as u64;
                reader.consume(i + 1);
                if cr {
                    // A `\n` right after belongs to the same line end.
                    if let Ok([b'\n', ..]) = reader.fill_buf() {
                        reader.consume(1);
                        return (2, None);
                    }
                }
                return (1, None);
            }
            None => {
                let n = avail.len();
                *len += n as u64;
                reader.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kb::ByteLines;

    /// (bytes, offset, number) of every line, read sequentially.
    fn sequential(data: &[u8]) -> Vec<(Vec<u8>, u64, Option<u64>)> {
        let mut lines = ByteLines::new(data);
        let mut out = Vec::new();
        while let Some(l) = lines.next_line().unwrap() {
            out.push((l.bytes.to_vec(), l.offset, l.number));
        }
        out
    }

    #[test]
    fn chunks_give_the_lines_of_a_sequential_read_in_order() {
        let mut data = Vec::new();
        for i in 0..200_000 {
            data.extend_from_slice(format!("line {i} {}\r\n", "x".repeat(i % 37)).as_bytes());
            if i % 1000 == 0 {
                data.push(b'\n');
            }
        }
        // One line longer than a chunk, and a last line without a newline.
        data.extend_from_slice(&vec![b'y'; CHUNK + 10]);
        data.extend_from_slice(b"\nlast");
        let want = sequential(&data);
        for parsers in [1, 3] {
            let mut got = Vec::new();
            let mut reader = io::BufReader::new(&data[..]);
            let cut = run(
                &mut reader,
                parsers,
                u64::MAX,
                |chunk| {
                    chunk
                        .lines()
                        .map(|l| (l.bytes.to_vec(), l.offset, l.number))
                        .collect::<Vec<_>>()
                },
                |lines| {
                    got.extend(lines);
                    Ok(())
                },
            )
            .unwrap();
            assert!(cut.is_none());
            assert_eq!(got.len(), want.len());
            assert!(got == want, "parsers {parsers}");
        }
    }

    #[test]
    fn an_emit_error_stops_the_threads() {
        let data = "a line\n".repeat(1_000_000);
        let mut reader = io::BufReader::new(data.as_bytes());
        let mut calls = 0;
        let r = run(
            &mut reader,
            2,
            u64::MAX,
            |chunk| chunk.bytes.len(),
            |_| {
                calls += 1;
                Err(IngestError::invalid("x", "stop"))
            },
        );
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}
