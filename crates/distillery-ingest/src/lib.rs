//! Streaming readers: raw corpora, knowledge bases and QA datasets into Distillery records.
//!
//! Each reader takes an [`InputCtx`] (where the file is, its options, an [`Opener`] for its
//! bytes and side files) and emits [`distillery_core::Record`]s into a
//! [`distillery_core::RecordSink`] as it reads: memory is bounded by one record (one page, one
//! JSON element, one line), never by the input, and a record by the reader's limit
//! (`max_page_bytes`, `max_line_bytes`, `max_record_bytes`: [`FormatOptions::record_limit`]).
//! A record over it is quarantined as `record_too_large` with its offset and length and read
//! past without being held, decompressed bytes included (a gzip of gigabytes of NULs is one
//! such record). The executor batches the records into Arrow `RecordBatch`es. Every record
//! gets a stable id from its content and source.
//!
//! Nothing is dropped silently: an input with no content is one `empty_input` record, one in
//! UTF-16 or UTF-32 one `unsupported_encoding` record naming the encoding (see [`read_input`]);
//! a UTF-8 byte order mark is skipped; lines end at `\n`, `\r\n` or a lone `\r`.
//!
//! Bad records never stop a reader: each goes to the sink as a
//! [`distillery_core::QuarantineRecord`] naming the file, the byte offset or line, the reason
//! and a raw excerpt, and reading goes on. A truncated compressed input keeps everything read
//! before the cut and quarantines the cut itself. [`IngestError`] is for inputs that cannot be
//! read at all.
//!
//! Big inputs are read in parts: [`split_ranges`] cuts a file into [`ByteRange`]s (at line
//! boundaries of plain line files, at bz2 stream starts of multistream MediaWiki dumps, found
//! with [`find_multistream_index`] or by scanning), and a reader given
//! [`InputCtx::range`] reads its part only; the ranges of a file together give the records of
//! a whole read, in the same order, placed by byte offset instead of line (see [`ByteRange`]
//! for the details, and for the context documents two ranges of a QA file both write). A
//! compressed line file cannot be split: it is decompressed on one thread and parsed on the
//! others.
//!
//! | format | module | produces |
//! |---|---|---|
//! | `mediawiki` | [`mediawiki`] | documents (sections, paragraphs, sentences, infobox, links), tables |
//! | `mediawiki-log` | [`mediawiki::log`] | changes (page deletions, restores, moves) |
//! | `freebase` | [`kb::freebase`] | triples, entities (names) |
//! | `wikidata` | [`kb::wikidata`] | triples, entities (labels, descriptions, aliases) |
//! | `fb15k` | [`kb::fb15k`] | triples (names from mid2name files), entities |
//! | `metaqa-kb` | [`kb::metaqa_kb`] | triples |
//! | `hotpotqa`, `musique`, `2wiki`, `hybridqa`, `tatqa`, `metaqa`, `cwq`, `simpleqa`, `webquestions`, `webqsp`, `qald`, `hotpotadv`, `zeroshot-re` | [`qa`] | questions, plus their contexts as documents and tables |
//!
//! Dependencies: `quick-xml` (streaming XML pull parser for MediaWiki dumps), `bzip2` (pure
//! Rust backend; multistream dumps) and `flate2` (gzip, with the `zlib-rs` backend: pure Rust
//! like `miniz_oxide` but faster to inflate, and already built for the Parquet writer's gzip),
//! `zstd` (zstd inputs; already built for the Parquet writer),
//! `serde_json` (QA and Wikidata JSON; the Wikidata reader's typed visitors skip what they do
//! not keep with `deserialize_any`, not with `RawValue`, so the `raw_value` feature is not
//! enabled: `RawValue` skips without checking UTF-8, escapes or number range, and would let
//! through entities the `Value` reader refuses, see [`kb::wikidata`]),
//! `md-5` (the MD5 sums a daily adds-changes folder lists for its files),
//! `memchr` (fast line and marker scanning), `unicode-segmentation` (UAX #29 sentence
//! boundaries). Wikitext is turned into text by hand-written code in [`mediawiki`]: the
//! available wikitext crates are either unmaintained with known hangs on real pages
//! (`parse_wiki_text` 0.1) or carry no licence (`parse-wiki-text-2`).

pub mod error;
pub mod input;
pub mod jsonstream;
pub mod kb;
pub mod mediawiki;
mod parlines;
pub mod qa;
mod range;
mod split;
pub mod text;

use distillery_core::RecordSink;
use distillery_core::spec::Format;
#[cfg(doc)]
use distillery_core::spec::FormatOptions;

pub use error::IngestError;
pub use input::{InputCtx, LocalFs, Opener};
pub use range::ByteRange;
pub use split::{find_multistream_index, split_ranges};

/// Reads one input file of `format` into `sink` (the part [`InputCtx::range`] names, when
/// set; an error for a range that cuts a file that cannot be split). An empty input, or one in
/// UTF-16 or UTF-32, is not handed to its reader: it becomes one quarantine record
/// (`empty_input`, `unsupported_encoding`) and a warning.
pub fn read_input(
    format: Format,
    ctx: &InputCtx<'_>,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    if range::Shape::of(format) == range::Shape::Other {
        // Readers of these formats know nothing of ranges: accept only a whole-file one.
        range::read_mode(range::Shape::Other, ctx)?;
    }
    if ctx.range.as_ref().is_none_or(|r| r.start == 0)
        && let Some(q) = probe(format, ctx)
    {
        tracing::warn!(location = %ctx.location, reason = %q.reason, detail = %q.detail, "input not read");
        sink.emit(distillery_core::Record::Quarantine(q))?;
        return Ok(());
    }
    match format {
        Format::MediaWiki => mediawiki::read(ctx, sink),
        Format::Freebase => kb::freebase::read(ctx, sink),
        Format::Wikidata => kb::wikidata::read(ctx, sink),
        Format::Fb15k => kb::fb15k::read(ctx, sink),
        Format::MetaQaKb => kb::metaqa_kb::read(ctx, sink),
        Format::HotpotQa => qa::hotpotqa::read(ctx, sink),
        Format::Musique => qa::musique::read(ctx, sink),
        Format::TwoWiki => qa::twowiki::read(ctx, sink),
        Format::HybridQa => qa::hybridqa::read(ctx, sink),
        Format::TatQa => qa::tatqa::read(ctx, sink),
        Format::MetaQa => qa::metaqa::read(ctx, sink),
        Format::Cwq => qa::cwq::read(ctx, sink),
        Format::SimpleQa => qa::simpleqa::read(ctx, sink),
        Format::WebQuestions => qa::webquestions::read(ctx, sink),
        Format::WebQsp => qa::webqsp::read(ctx, sink),
        Format::Qald => qa::qald::read(ctx, sink),
        Format::HotpotAdv => qa::hotpotadv::read(ctx, sink),
        Format::ZeroShotRe => qa::zeroshot_re::read(ctx, sink),
        Format::WikiOfGraph => kb::wikiofgraph::read(ctx, sink),
        Format::CommonsenseQa => qa::commonsenseqa::read(ctx, sink),
        Format::NqOpen => qa::nq_open::read(ctx, sink),
        Format::MediaWikiLog => mediawiki::log::read(ctx, sink),
    }
}

/// Bytes of the decompressed head [`probe`] looks at.
const PROBE_BYTES: usize = 1 << 16;

/// Looks at the first bytes of an input before its reader does: an input with no content
/// (no bytes, or only whitespace) is quarantined as `empty_input`, and one in an encoding no
/// reader takes (UTF-16 or UTF-32, told by its byte order mark or, for UTF-16 without one, by
/// the NUL byte of every other character) as `unsupported_encoding`, naming it; either is the
/// input's one record, so that nothing is dropped silently. `None` when the input looks
/// readable, or cannot even be opened (the reader reports that).
fn probe(format: Format, ctx: &InputCtx<'_>) -> Option<distillery_core::QuarantineRecord> {
    use std::io::BufRead;
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (mut reader, _) = input::open_decompressed(ctx.opener, &ctx.location, counter).ok()?;
    let mut head = Vec::new();
    let mut eof = false;
    while head.len() < PROBE_BYTES {
        match reader.fill_buf() {
            Ok([]) => {
                eof = true;
                break;
            }
            Ok(b) => {
                let n = b.len().min(PROBE_BYTES - head.len());
                head.extend_from_slice(&b[..n]);
                reader.consume(n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let q = |reason: &str, detail: String| {
        distillery_core::QuarantineRecord::new(
            format.name(),
            &ctx.location,
            reason,
            detail,
            &head[..head.len().min(64)],
        )
        .at_byte(0)
    };
    if let Some(name) = wide_encoding(&head) {
        return Some(q(
            "unsupported_encoding",
            format!("{name} text: convert the file to UTF-8"),
        ));
    }
    let body = head.strip_prefix(kb::UTF8_BOM).unwrap_or(&head);
    if eof && body.iter().all(u8::is_ascii_whitespace) {
        let what = if head.is_empty() {
            "no bytes".to_string()
        } else {
            format!("only {} bytes of whitespace", head.len())
        };
        return Some(q(
            "empty_input",
            format!("the input holds {what}: no records"),
        ));
    }
    None
}

/// The name of a UTF-16 or UTF-32 encoding the head of a text is in, if any: by its byte order
/// mark, or UTF-16 without one when every other byte of the head is NUL and the others are not
/// (ASCII text in UTF-16).
fn wide_encoding(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(&[0xFF, 0xFE, 0, 0]) {
        return Some("UTF-32 (little-endian)");
    }
    if head.starts_with(&[0, 0, 0xFE, 0xFF]) {
        return Some("UTF-32 (big-endian)");
    }
    if head.starts_with(&[0xFF, 0xFE]) {
        return Some("UTF-16 (little-endian)");
    }
    if head.starts_with(&[0xFE, 0xFF]) {
        return Some("UTF-16 (big-endian)");
    }
    let pairs = head.len().min(256) / 2;
    if pairs < 4 {
        return None;
    }
    let pairs = || head.chunks_exact(2).take(pairs);
    if pairs().all(|p| p[0] != 0 && p[1] == 0) {
        return Some("UTF-16 (little-endian)");
    }
    if pairs().all(|p| p[0] == 0 && p[1] != 0) {
        return Some("UTF-16 (big-endian)");
    }
    None
}
