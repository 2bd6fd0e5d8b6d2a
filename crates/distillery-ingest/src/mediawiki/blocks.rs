//! Single-stream bz2 dumps read in byte ranges, cut at bz2 *block* boundaries.
//!
//! A bz2 stream is a 4-byte header (`BZh1`..`BZh9`), blocks, and an end-of-stream marker. Each
//! block starts with the 48-bit magic 0x314159265359 followed by its CRC, at any *bit* offset
//! (blocks are bit-packed), and decodes to at most the level's block size after the first
//! run-length stage, independently of the blocks around it. Daily adds-changes files and many
//! dumps are one stream, so the streams of a multistream dump cannot cut them; their blocks can,
//! as lbzip2 and pbzip2 do:
//!
//! - [`find_magics`] finds a 48-bit magic at every bit offset: for each of the 8 shifts, the
//!   5 bytes the shifted magic fills entirely are searched with `memmem`, and the partial
//!   bytes at both ends checked.
//! - A block between two candidates (block or end-of-stream magics) is re-framed as a stream
//!   of its own: `BZh9`, the block's bits realigned to a byte, the end-of-stream magic and a
//!   stream CRC equal to the block's (the stream CRC of one block is that block's CRC). The
//!   decoder checks that CRC, so a false candidate (the magic occurring inside compressed data,
//!   odds of 2^-48 a bit) cannot pass: a block that does not decode is retried up to the
//!   following candidates before it is called damaged.
//! - [`read`] reads the blocks whose magic starts in `[start * 8, end * 8)`, and on past
//!   `end` until every page that started in its own blocks is complete. A range that starts
//!   inside a page drops its tail (the page belongs to the range where its `<page` starts:
//!   the splitter only starts pages at `<page`, which cannot occur inside a page). So every
//!   page is read by exactly one range, however the ranges were cut.
//!
//! Quarantine records are placed by block: the compressed *bit* offset of the block in which
//! the bad page starts and the byte offset in that block's text, the same whatever the cut. A
//! block that does not decode (a damaged file) ends the page that was open as
//! `corrupt_input`, and reading resumes at the next block that decodes; a file cut short ends
//! with `truncated_input`.

use std::io::{self, Read};
use std::sync::atomic::Ordering;

use distillery_core::RecordSink;
use memchr::memmem;

use super::xml::{PageSplitter, Split, SplitEnd};
use super::{Base, Item, PageCtx, Pending, RootState, emit_items, finish, process_split};
use crate::{ByteRange, IngestError, InputCtx};

/// The block magic (the digits of pi in BCD).
pub(crate) const BLOCK_MAGIC: u64 = 0x3141_5926_5359;
/// The end-of-stream magic (the digits of sqrt(pi)).
pub(crate) const EOS_MAGIC: u64 = 0x1772_4538_5090;

/// Compressed bytes read at once.
const CHUNK: u64 = 4 << 20;
/// Most compressed bytes between two candidates: a level-9 block of incompressible data is
/// about 1 MB; beyond this the data is not a bz2 block.
const MAX_BLOCK_BYTES: u64 = 16 << 20;
/// Most bytes one block decodes to (run-length coding lets 900 kB of block hold ~46 MB).
const MAX_BLOCK_TEXT: u64 = 64 << 20;
/// Candidates after a block's end tried when it does not decode (false candidates inside it).
const MERGES: usize = 2;

/// Where each 48-bit `magic` starts in `data`, as bit offsets, for start bytes in `from..to`,
/// in increasing order.
pub(crate) fn find_magics(data: &[u8], magic: u64, from: usize, to: usize) -> Vec<u64> {
    let to = to.min(data.len());
    let mut out = Vec::new();
    for shift in 0..8u32 {
        // The magic at bit `shift` of byte i: bytes i+1..i+6 are all magic, byte i holds its
        // first 8 - shift bits, byte i+6 its last `shift` bits.
        let v = (magic << (16 - shift)).to_be_bytes();
        let (mask0, mask6) = (0xFFu8 >> shift, !(0xFFu8 >> shift));
        let finder = memmem::Finder::new(&v[1..6]);
        let hay_end = (to + 6).min(data.len());
        if from + 1 >= hay_end {
            continue;
        }
        for j in finder.find_iter(&data[from + 1..hay_end]) {
            let i = from + j;
            if i >= to
                || data[i] & mask0 != v[0] & mask0
                || (mask6 != 0 && data.get(i + 6).is_none_or(|&b| b & mask6 != v[6] & mask6))
            {
                continue;
            }
            out.push(i as u64 * 8 + u64::from(shift));
        }
    }
    out.sort_unstable();
    out
}

/// `n` bits (at most 64) of `data` from bit `at`, most significant first.
fn bits_at(data: &[u8], at: u64, n: u32) -> u64 {
    let mut v = 0u64;
    for k in 0..u64::from(n) {
        let bit = at + k;
        let b = data[(bit / 8) as usize] >> (7 - bit % 8) & 1;
        v = v << 1 | u64::from(b);
    }
    v
}

/// Bits of `data` from `from` to `to` as a stream of their own: `BZh9`, the bits realigned,
/// the end-of-stream magic and `crc` as the stream CRC, zero-padded to a byte.
fn frame(data: &[u8], from: u64, to: u64, crc: u32) -> Vec<u8> {
    let n = to - from;
    let shift = (from % 8) as u32;
    let first = (from / 8) as usize;
    let nbytes = n.div_ceil(8) as usize;
    let mut out = Vec::with_capacity(4 + nbytes + 11);
    out.extend_from_slice(b"BZh9");
    for k in 0..nbytes {
        let hi = data[first + k] << shift;
        let lo = match (shift, data.get(first + k + 1)) {
            (0, _) | (_, None) => 0,
            (s, Some(&b)) => b >> (8 - s),
        };
        out.push(hi | lo);
    }
    // Bits used in the last byte; the rest are overwritten below.
    let used = (n % 8) as u32;
    let mut tail_bits = u128::from(EOS_MAGIC) << 32 | u128::from(crc);
    let mut tail_len = 80u32;
    if used != 0 {
        let last = out.pop().expect("a block has bits") & !(0xFFu8 >> used);
        tail_bits |= u128::from(last >> (8 - used)) << tail_len;
        tail_len += used;
    }
    let total = tail_len.div_ceil(8) * 8;
    tail_bits <<= total - tail_len;
    for k in (0..total / 8).rev() {
        out.push((tail_bits >> (k * 8)) as u8);
    }
    out
}

/// Decodes the block between bits `from` and `to` of `data`; `None` when it is not one whole
/// block (a false candidate, damaged data, a cut file).
fn decode_block(data: &[u8], from: u64, to: u64) -> Option<Vec<u8>> {
    if to < from + 48 + 32 + 24 {
        return None;
    }
    let crc = bits_at(data, from + 48, 32) as u32;
    let stream = frame(data, from, to, crc);
    let mut dec = bzip2::read::BzDecoder::new(stream.as_slice());
    let mut text = Vec::new();
    let ok = (&mut dec)
        .take(MAX_BLOCK_TEXT + 1)
        .read_to_end(&mut text)
        .is_ok();
    (ok && text.len() as u64 <= MAX_BLOCK_TEXT && dec.total_in() == stream.len() as u64)
        .then_some(text)
}

/// A decoded block.
#[derive(Debug)]
pub(crate) struct Block {
    /// Compressed bit offset of its magic.
    pub bit: u64,
    pub text: Vec<u8>,
    /// Compressed bytes it spans.
    pub compressed: u64,
}

/// What the scanner met instead of a block.
#[derive(Debug)]
pub(crate) enum BlockError {
    /// The block at this bit does not decode (damaged data); reading may resume at `next`.
    Corrupt {
        bit: u64,
        next: Option<u64>,
    },
    /// The file ends inside the block at this bit.
    Truncated {
        bit: u64,
    },
    Io(io::Error),
}

/// A candidate: a block or an end-of-stream magic.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Cand {
    bit: u64,
    eos: bool,
}

/// The blocks of a bz2 file from a byte offset on, decoded one by one.
pub(crate) struct BlockScanner<'a> {
    ctx: &'a InputCtx<'a>,
    size: u64,
    /// Compressed bytes held, from byte `buf_start`.
    buf: Vec<u8>,
    buf_start: u64,
    /// Candidates found and not consumed, in order.
    cands: std::collections::VecDeque<Cand>,
    /// Start bytes below this were searched for candidates.
    searched: u64,
}

impl<'a> BlockScanner<'a> {
    /// The blocks whose magic starts at bit `8 * from` or later.
    pub(crate) fn new(ctx: &'a InputCtx<'a>, size: u64, from: u64) -> BlockScanner<'a> {
        BlockScanner {
            ctx,
            size,
            buf: Vec::new(),
            buf_start: from,
            cands: Default::default(),
            searched: from,
        }
    }

    fn end(&self) -> u64 {
        self.buf_start + self.buf.len() as u64
    }

    /// Reads on until at least `n` candidates are known or the file ends; `false` at the end.
    fn want(&mut self, n: usize) -> io::Result<bool> {
        while self.cands.len() < n {
            if self.end() >= self.size {
                // The last bytes: candidates whose magic fits.
                self.search(self.size);
                return Ok(self.cands.len() >= n);
            }
            if self.end() - self.buf_start > MAX_BLOCK_BYTES * (MERGES as u64 + 2) {
                return Ok(false);
            }
            let len = CHUNK.min(self.size - self.end());
            let data = self
                .ctx
                .opener
                .read_range(&self.ctx.location, self.end(), len)?;
            if data.is_empty() {
                self.size = self.end();
                continue;
            }
            self.buf.extend_from_slice(&data);
            // A magic starting at byte i needs bytes up to i + 6.
            self.search(self.end().saturating_sub(6));
        }
        Ok(true)
    }

    /// Looks for candidates starting at bytes `searched..to`.
    fn search(&mut self, to: u64) {
        if to <= self.searched {
            return;
        }
        let (from, upto) = (
            (self.searched - self.buf_start) as usize,
            (to - self.buf_start) as usize,
        );
        let blocks = find_magics(&self.buf, BLOCK_MAGIC, from, upto);
        let eos = find_magics(&self.buf, EOS_MAGIC, from, upto);
        let mut all: Vec<Cand> = blocks
            .into_iter()
            .map(|b| Cand {
                bit: self.buf_start * 8 + b,
                eos: false,
            })
            .chain(eos.into_iter().map(|b| Cand {
                bit: self.buf_start * 8 + b,
                eos: true,
            }))
            .collect();
        all.sort_by_key(|c| c.bit);
        self.cands.extend(all);
        self.searched = to;
    }

    /// Drops held bytes before bit `bit`.
    fn release(&mut self, bit: u64) {
        let byte = bit / 8;
        if byte > self.buf_start {
            let n = ((byte - self.buf_start) as usize).min(self.buf.len());
            self.buf.drain(..n);
            self.buf_start += n as u64;
        }
    }

    /// The next block, decoded; `None` after the last one.
    pub(crate) fn next_block(&mut self) -> Result<Option<Block>, BlockError> {
        // End-of-stream candidates end the block before them; none starts one.
        while self.want(1).map_err(BlockError::Io)? && self.cands[0].eos {
            self.cands.pop_front();
        }
        let Some(&start) = self.cands.front() else {
            return Ok(None);
        };
        // The block ends at the next candidate; if it does not decode there, at the ones
        // after (a false candidate inside it).
        let mut ends = Vec::new();
        for k in 1..=MERGES + 1 {
            if !self.want(k + 1).map_err(BlockError::Io)? {
                break;
            }
            ends.push(self.cands[k].bit);
        }
        let base = self.buf_start * 8;
        let decoded = ends.iter().enumerate().find_map(|(k, &to)| {
            decode_block(&self.buf, start.bit - base, to - base).map(|t| (k, to, t))
        });
        match decoded {
            Some((k, to, text)) => {
                for _ in 0..=k {
                    self.cands.pop_front();
                }
                self.release(to);
                Ok(Some(Block {
                    bit: start.bit,
                    text,
                    compressed: (to - start.bit).div_ceil(8),
                }))
            }
            None if ends.is_empty() => {
                // Nothing after it: the file ends inside this block.
                self.cands.clear();
                self.release(self.end() * 8);
                Err(BlockError::Truncated { bit: start.bit })
            }
            None => {
                self.cands.pop_front();
                self.release(self.cands.front().map_or(start.bit, |c| c.bit));
                let next = self.cands.iter().find(|c| !c.eos).map(|c| c.bit);
                Err(BlockError::Corrupt {
                    bit: start.bit,
                    next,
                })
            }
        }
    }
}

/// Where the blocks a range fed start in its decoded text, to place quarantine records by the
/// block a page starts in.
#[derive(Default)]
struct Marks {
    /// (decoded offset where a block's text starts, the block's bit offset), in order.
    starts: Vec<(u64, u64)>,
}

impl Marks {
    /// The block holding decoded offset `offset`: where its text starts, and its bit offset.
    fn at(&self, offset: u64, or_bit: u64) -> (u64, u64) {
        let i = self.starts.partition_point(|&(o, _)| o <= offset);
        match i {
            0 => (
                offset.min(self.starts.first().map_or(offset, |s| s.0)),
                or_bit,
            ),
            i => self.starts[i - 1],
        }
    }

    /// An item placed by the block its page starts in.
    fn place(&self, item: Item) -> (Item, Base) {
        match item {
            Item::Quarantine(mut p) => {
                let (o, bit) = self.at(p.offset, 0);
                p.offset -= o;
                p.page = None;
                (Item::Quarantine(p), block_base(bit))
            }
            records => (records, Base::default()),
        }
    }
}

fn block_base(bit: u64) -> Base {
    Base {
        stream: Some(bit),
        block: true,
        ..Base::default()
    }
}

fn split_offset(split: &Split) -> u64 {
    match split {
        Split::Page(p) | Split::Unterminated(p) | Split::Oversized(p, _) => p.offset,
    }
}

/// Reads the pages of the blocks of a bz2 dump whose magic starts in `range` (see the module
/// docs).
pub(super) fn read(
    ctx: &InputCtx<'_>,
    pctx: &PageCtx,
    range: ByteRange,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let size = super::file_size(ctx)?;
    let end_bit = range.end.saturating_mul(8);
    let mut scanner = BlockScanner::new(ctx, size, range.start);
    let mut splitter = PageSplitter::with_limit(pctx.max_page);
    let mut marks = Marks::default();
    let mut fed = 0u64;
    // Decoded bytes of the range's own blocks, once a block past its end is met.
    let mut own: Option<u64> = None;
    let mut roots = RootState::default();
    // This range read the file's last block: the end-of-input checks are its.
    let mut at_end = false;
    let mut cut: Option<io::Error> = None;
    // The last decoded bytes, for an end tag cut by a block boundary.
    let mut tail: Vec<u8> = Vec::new();
    loop {
        if own.is_some_and(|l| splitter.settled_from() >= l) {
            break;
        }
        let block = match scanner.next_block() {
            Ok(Some(b)) => b,
            Ok(None) => {
                at_end = own.is_none();
                break;
            }
            Err(BlockError::Io(e)) => return Err(IngestError::io(&ctx.location, e)),
            Err(BlockError::Truncated { bit }) => {
                let e = io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the file ends inside the bz2 block at compressed bit {bit}"),
                );
                if own.is_none() && bit < end_bit {
                    // Ours: reported at the end, with the page it cut.
                    cut = Some(e);
                    at_end = true;
                } else {
                    // Not ours: only a page of ours that it cut is reported here.
                    let own = own.or(Some(fed));
                    let end = splitter.finish();
                    lost(
                        "truncated_input",
                        &e.to_string(),
                        &end,
                        own,
                        fed,
                        &marks,
                        pctx,
                        sink,
                    )?;
                    return Ok(());
                }
                break;
            }
            Err(BlockError::Corrupt { bit, next }) => {
                let detail = format!("the bz2 block at compressed bit {bit} does not decode");
                tracing::warn!(location = %pctx.location, bit, "bz2 block does not decode: skipped");
                let end =
                    std::mem::replace(&mut splitter, PageSplitter::starting_at(pctx.max_page, fed))
                        .finish();
                roots.merge(&end);
                let ours = own.is_none() && bit < end_bit;
                if end.open_page.is_some() || ours {
                    lost("corrupt_input", &detail, &end, own, fed, &marks, pctx, sink)?;
                }
                if own.is_some() || next.is_none_or(|n| n >= end_bit) {
                    break;
                }
                continue;
            }
        };
        if own.is_none() && block.bit >= end_bit {
            own = Some(fed);
            if splitter.settled_from() >= fed {
                break;
            }
        }
        ctx.bytes_read
            .fetch_add(block.compressed, Ordering::Relaxed);
        marks.starts.push((fed, block.bit));
        let limit = own;
        splitter.feed(&block.text, &mut |split| {
            if limit.is_some_and(|l| split_offset(&split) >= l) {
                return Ok(());
            }
            for item in process_split(split, pctx) {
                let (item, base) = marks.place(item);
                emit_items(vec![item], base, pctx, sink)?;
            }
            Ok::<(), IngestError>(())
        })?;
        fed += block.text.len() as u64;
        let keep = block.text.len().min(16);
        tail.extend_from_slice(&block.text[block.text.len() - keep..]);
        tail.drain(..tail.len().saturating_sub(16));
    }
    if marks.starts.is_empty() && cut.is_none() {
        // No block of its own: nothing of the file is this range's.
        return Ok(());
    }
    let mut end = splitter.finish();
    if !at_end {
        // The pages after this point, and the end tag, are the next ranges'.
        end.open_page = None;
        roots.end = true;
    } else if !end.saw_root_end && fed <= 12 {
        // The range's only text ends the end tag that the block before began.
        let t = String::from_utf8_lossy(&tail);
        let t = t.trim_end();
        roots.end |= !t.is_empty() && "</mediawiki>".ends_with(t);
    }
    if range.start > 0 {
        roots.start |= first_block_opens_root(ctx, size);
    }
    let (o, bit) = match &end.open_page {
        Some(p) => marks.at(p.offset, range.start * 8),
        None => marks.at(end.bytes, range.start * 8),
    };
    match end.open_page.as_mut() {
        Some(p) => p.offset -= o,
        None => end.bytes -= o,
    }
    finish(end, cut, block_base(bit), roots, pctx, sink)
}

/// Quarantines what a block that cannot be read cost: the page open there when it is this
/// range's, else the block itself.
#[allow(clippy::too_many_arguments)]
fn lost(
    reason: &'static str,
    detail: &str,
    end: &SplitEnd,
    own: Option<u64>,
    fed: u64,
    marks: &Marks,
    pctx: &PageCtx,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let page = end
        .open_page
        .as_ref()
        .filter(|p| own.is_none_or(|l| p.offset < l));
    let (offset, excerpt, what) = match page {
        Some(p) => (
            p.offset,
            p.bytes[..p.bytes.len().min(512)].to_vec(),
            "the page open there is lost",
        ),
        None if own.is_some() => return Ok(()),
        None => (fed, Vec::new(), "no page was open there"),
    };
    let item = Item::Quarantine(Pending {
        reason,
        detail: format!("{detail}; {what}"),
        excerpt,
        offset,
        page: None,
    });
    let (item, base) = marks.place(item);
    emit_items(vec![item], base, pctx, sink)
}

/// Whether the file's first block opens the `<mediawiki>` root (for a range that starts
/// later and must know whether the end tag is due).
fn first_block_opens_root(ctx: &InputCtx<'_>, size: u64) -> bool {
    let mut scanner = BlockScanner::new(ctx, size, 0);
    match scanner.next_block() {
        Ok(Some(b)) => memmem::find(&b.text, b"<mediawiki").is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn bz(data: &[u8], level: u32) -> Vec<u8> {
        let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Text that compresses to several level-1 blocks (100 kB each).
    fn text(n: usize) -> Vec<u8> {
        let mut s = Vec::new();
        let mut x = 12345u64;
        for i in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s.extend_from_slice(format!("line {i} {:x} {}\n", x, x % 977).as_bytes());
        }
        s
    }

    #[test]
    fn magics_are_found_at_every_bit_offset() {
        for shift in 0..8u32 {
            let mut data = vec![0xA5u8; 20];
            // Write the block magic at bit 24 + shift.
            let at = 24 + u64::from(shift);
            for k in 0..48u64 {
                let bit = at + k;
                let v = (BLOCK_MAGIC >> (47 - k)) & 1;
                let (byte, off) = ((bit / 8) as usize, 7 - (bit % 8) as u32);
                data[byte] = data[byte] & !(1 << off) | ((v as u8) << off);
            }
            assert_eq!(
                find_magics(&data, BLOCK_MAGIC, 0, 20),
                [at],
                "shift {shift}"
            );
            assert_eq!(bits_at(&data, at, 48), BLOCK_MAGIC);
            assert!(find_magics(&data, BLOCK_MAGIC, 4, 20).is_empty());
            assert!(find_magics(&data, EOS_MAGIC, 0, 20).is_empty());
        }
    }

    #[test]
    fn every_block_decodes_alone_and_they_join_to_the_text() {
        let t = text(60_000);
        let z = bz(&t, 1);
        let blocks = find_magics(&z, BLOCK_MAGIC, 0, z.len());
        let eos = find_magics(&z, EOS_MAGIC, 0, z.len());
        assert!(blocks.len() >= 3, "{} blocks", blocks.len());
        assert_eq!(eos.len(), 1);
        let mut bounds = blocks.clone();
        bounds.push(eos[0]);
        let mut joined = Vec::new();
        for w in bounds.windows(2) {
            joined.extend(decode_block(&z, w[0], w[1]).expect("decodes"));
        }
        assert_eq!(joined, t);
        // One bit short, or two blocks as one: refused by the CRC or the decoder.
        assert!(decode_block(&z, bounds[0], bounds[1] - 1).is_none());
        assert!(decode_block(&z, bounds[0], bounds[2]).is_none());
        assert!(decode_block(&z, bounds[0] + 1, bounds[1]).is_none());
    }
}
