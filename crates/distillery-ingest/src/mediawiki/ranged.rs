//! Reading a byte range of a bz2 MediaWiki dump: the bz2 streams that start in the range.
//!
//! The streams are found by scanning from the range's start: the bytes are read anyway, and a
//! planner that snapped its cuts to stream starts (from the dump's index or by scanning, see
//! [`crate::split_ranges`]) makes the range start exactly on one. They are decoded in parallel
//! as in a whole read (the `multistream` module); the last one is read to its end, past the
//! range's end. So every stream, and every page in it, is read by exactly one range of a file,
//! however the ranges were cut. A single-stream bz2 dump is one stream, read by the range that
//! holds offset 0.
//!
//! The checks at the end of the input belong to the range that reads the file's last stream
//! (a missing `</mediawiki>`). That range, or one with no pages at all, needs to know whether the
//! dump has a `<mediawiki>` root: when it does not start at 0 it decodes the dump's first stream
//! (`<mediawiki>` and `<siteinfo>`) for that alone; the first stream's pages, if any, belong to
//! the range holding offset 0.
//!
//! Anything unexpected (a stream that does not decode, a page across two streams, a stream over
//! 64 MiB) falls back to sequential decoding from the first stream not yet emitted up to the
//! first stream start at or after the range's end, as a whole read falls back up to the end of
//! the file. Quarantine records are placed by stream (see the `mediawiki` module docs).

use std::sync::atomic::Ordering;

use distillery_core::RecordSink;

use super::multistream::{decode_one, decode_streams, read_sequential_from};
use super::streams::{Scanner, first_start_from};
use super::xml::SplitEnd;
use super::{Base, PageCtx, RootState, emit_items, finish};
use crate::{ByteRange, IngestError, InputCtx};

/// Reads the streams of the context's bz2 dump that start in `range`; `parallel` decodes them
/// on worker threads, else one after the other on this thread (the same records either way:
/// quarantine records are placed by stream in both).
pub(super) fn read(
    ctx: &InputCtx<'_>,
    pctx: &PageCtx,
    range: ByteRange,
    parallel: bool,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let size = super::file_size(ctx)?;
    let mut scanner = Scanner::range(ctx.opener, &ctx.location, size, range.start, range.end);
    let mut fallback = None;
    let first = match scanner.next_stream() {
        // No stream starts in the range.
        Ok(None) => return Ok(()),
        Ok(Some(first)) => Some(first),
        Err(e) => {
            fallback = Some(e.offset());
            None
        }
    };
    let mut roots = RootState::default();
    let mut pages = 0u64;
    let mut last_stream = range.start;
    let mut reached_end = false;
    if let Some(first) = first {
        last_stream = first.offset;
        fallback = decode_streams(ctx, scanner, first, pctx, parallel, |frag| {
            let base = Base {
                offset: 0,
                page: pages,
                stream: Some(frag.offset),
                block: false,
            };
            emit_items(frag.items, base, pctx, sink)?;
            pages += frag.end.pages;
            roots.merge(&frag.end);
            last_stream = frag.offset;
            reached_end |= frag.last;
            ctx.bytes_read.fetch_add(frag.compressed, Ordering::Relaxed);
            Ok(())
        })?;
    }
    let header_root = |size| range.start > 0 && header_has_root(ctx, pctx, size);
    match fallback {
        None => {
            if reached_end || pages == 0 {
                roots.start |= header_root(size);
            }
            // The end of the file is another range's to check.
            roots.end |= !reached_end;
            let base = Base {
                offset: 0,
                page: pages,
                stream: Some(last_stream),
                block: false,
            };
            finish(SplitEnd::default(), None, base, roots, pctx, sink)
        }
        Some(from) => {
            tracing::debug!(location = %ctx.location, offset = from, "mediawiki range: sequential from here");
            let stop = first_start_from(
                ctx.opener,
                &ctx.location,
                range.end.max(from + 1),
                size,
                u64::MAX,
            )
            .map_err(|e| IngestError::io(&ctx.location, e))?
            .unwrap_or(size);
            roots.start |= header_root(size);
            roots.end |= stop < size;
            let base = Base {
                offset: 0,
                page: pages,
                stream: Some(from),
                block: false,
            };
            read_sequential_from(ctx, from, stop, base, roots, pctx, sink)
        }
    }
}

/// Whether the dump's first stream opens the `<mediawiki>` root.
fn header_has_root(ctx: &InputCtx<'_>, pctx: &PageCtx, size: u64) -> bool {
    let mut scanner = Scanner::from_start(ctx.opener, &ctx.location, size);
    match scanner.next_stream() {
        Ok(Some(stream)) => decode_one(&stream, pctx).is_some_and(|f| f.end.saw_root_start),
        _ => false,
    }
}
