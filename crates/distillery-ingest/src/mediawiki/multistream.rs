//! Parallel decoding of multistream bz2 dumps.
//!
//! The file is cut into its bz2 streams by a `streams::Scanner` (see the `streams` module for
//! the layout of a multistream dump). One producer thread runs the scanner;
//! `available_parallelism()` workers decode each stream and turn its pages into records; the
//! calling thread emits the results in stream order. A window of in-flight streams (twice the
//! workers) bounds memory: the producer takes a token per stream and the emitter returns it
//! once the stream is written. Offsets and page indexes of quarantine records are made absolute
//! at emission, so the output is identical to sequential reading.
//!
//! Anything unexpected falls back to sequential reading from the first stream not yet emitted:
//! a stream that does not decode (a false candidate, a cut or corrupt file), a fragment that
//! ends inside a page, a stream over 64 MiB compressed. A file with a single stream is read
//! sequentially from the start. The same decoding serves byte-range reads (the `ranged`
//! module), which place records by stream instead.

use std::collections::BTreeMap;
use std::io::{self, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use distillery_core::RecordSink;

use super::streams::{ScanError, Scanner, Stream};
use super::xml::{PageSplitter, SplitEnd};
use super::{Base, Item, PageCtx, RootState, emit_items, finish, process_split, read_sequential};
use crate::{IngestError, InputCtx};

/// Most decompressed bytes of one stream.
const MAX_FRAGMENT: u64 = 1 << 30;

/// A decoded stream's records.
pub(super) struct Fragment {
    pub items: Vec<Item>,
    pub end: SplitEnd,
    /// Compressed offset and size of the stream.
    pub offset: u64,
    pub compressed: u64,
    /// No stream follows in the file.
    pub last: bool,
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
    let mut splitter = PageSplitter::with_limit(pctx.max_page);
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
        offset: stream.offset,
        compressed: stream.data.len() as u64,
        last: stream.last,
    }))
}

/// Decodes one stream on this thread; `None` when it does not decode as a whole stream.
pub(super) fn decode_one(stream: &Stream, pctx: &PageCtx) -> Option<Fragment> {
    match decode(stream, pctx) {
        Outcome::Done(frag) => Some(*frag),
        Outcome::Fallback(_) => None,
    }
}

/// A `Read` over a byte range of a location, through `read_range`, counting what it reads.
pub(super) struct RangeReader<'a> {
    ctx: &'a InputCtx<'a>,
    pos: u64,
    end: u64,
    chunk: Vec<u8>,
    at: usize,
}

impl<'a> RangeReader<'a> {
    /// The bytes `[pos, end)` of the context's location.
    pub(super) fn new(ctx: &'a InputCtx<'a>, pos: u64, end: u64) -> Self {
        RangeReader {
            ctx,
            pos,
            end,
            chunk: Vec::new(),
            at: 0,
        }
    }
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

/// Decodes the bz2 streams `[from, end)` of the context's location one after the other into
/// pages, from `base` on.
pub(super) fn read_sequential_from(
    ctx: &InputCtx<'_>,
    from: u64,
    end: u64,
    base: Base,
    roots: RootState,
    pctx: &PageCtx,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let range = RangeReader::new(ctx, from, end);
    let decoder = bzip2::read::MultiBzDecoder::new(BufReader::with_capacity(1 << 16, range));
    let mut reader = BufReader::with_capacity(1 << 16, decoder);
    read_sequential(&mut reader, base, roots, pctx, sink)
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
    let mut scanner = Scanner::from_start(ctx.opener, &ctx.location, size);
    let first = match scanner.next_stream() {
        Ok(Some(s)) if !s.last => s,
        _ => return Ok(false),
    };
    let mut base = Base::default();
    let mut roots = RootState::default();
    let fallback = decode_streams(ctx, scanner, first, pctx, true, |frag| {
        emit_items(frag.items, base, pctx, sink)?;
        base.offset += frag.end.bytes;
        base.page += frag.end.pages;
        roots.merge(&frag.end);
        ctx.bytes_read.fetch_add(frag.compressed, Ordering::Relaxed);
        Ok(())
    })?;
    match fallback {
        None => {
            let end = SplitEnd {
                bytes: 0,
                ..Default::default()
            };
            finish(end, None, base, roots, pctx, sink)?;
        }
        Some(offset) => {
            tracing::debug!(location = %ctx.location, offset, "mediawiki multistream: sequential from here");
            read_sequential_from(ctx, offset, size, base, roots, pctx, sink)?;
        }
    }
    Ok(true)
}

/// Decodes `first` and the streams `scanner` yields after it, on worker threads when
/// `parallel` (else on this one), handing the fragments to `on_fragment` on this thread in
/// stream order. Returns the compressed offset to go on from sequentially when a stream did not
/// decode or could not be delimited; `None` when every stream was handed over.
pub(super) fn decode_streams(
    ctx: &InputCtx<'_>,
    mut scanner: Scanner<'_>,
    first: Stream,
    pctx: &PageCtx,
    parallel: bool,
    mut on_fragment: impl FnMut(Fragment) -> Result<(), IngestError>,
) -> Result<Option<u64>, IngestError> {
    if !parallel {
        let mut next = Some(first);
        while let Some(stream) = next.take() {
            match decode(&stream, pctx) {
                Outcome::Done(frag) => on_fragment(*frag)?,
                Outcome::Fallback(offset) => return Ok(Some(offset)),
            }
            if stream.last {
                break;
            }
            next = match scanner.next_stream() {
                Ok(s) => s,
                Err(e) => return Ok(Some(e.offset())),
            };
        }
        return Ok(None);
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .max(1);
    let window = 2 * workers;
    tracing::debug!(location = %ctx.location, workers, "mediawiki multistream: parallel decoding");

    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
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
                        Err(e) => {
                            if let ScanError::Io(offset, e) = &e {
                                tracing::debug!(offset, error = %e, "mediawiki multistream: read failed");
                            }
                            let _ = res_tx.send((index, Outcome::Fallback(e.offset())));
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
                        if let Err(e) = on_fragment(*frag) {
                            result = Err(e);
                            break 'recv;
                        }
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
    })
}
