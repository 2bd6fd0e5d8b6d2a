//! Streaming readers: raw corpora, knowledge bases and QA datasets into Distillery records.
//!
//! Each reader takes an [`InputCtx`] (where the file is, its options, an [`Opener`] for its
//! bytes and side files) and emits [`distillery_core::Record`]s into a
//! [`distillery_core::RecordSink`] as it reads: memory is bounded by one record (one page, one
//! JSON element, one line), never by the input. The executor batches the records into Arrow
//! `RecordBatch`es. Every record gets a stable id from its content and source.
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
//! | `freebase` | [`kb::freebase`] | triples, entities (names) |
//! | `wikidata` | [`kb::wikidata`] | triples, entities (labels, descriptions, aliases) |
//! | `fb15k` | [`kb::fb15k`] | triples (names from mid2name files), entities |
//! | `metaqa-kb` | [`kb::metaqa_kb`] | triples |
//! | `hotpotqa`, `musique`, `2wiki`, `hybridqa`, `tatqa`, `metaqa`, `cwq`, `simpleqa`, `webquestions`, `webqsp`, `qald`, `hotpotadv`, `zeroshot-re` | [`qa`] | questions, plus their contexts as documents and tables |
//!
//! Dependencies: `quick-xml` (streaming XML pull parser for MediaWiki dumps), `bzip2` (pure
//! Rust backend; multistream dumps) and `flate2` (gzip, with the `zlib-rs` backend: pure Rust
//! like `miniz_oxide` but faster to inflate, and already built for the Parquet writer's gzip),
//! `serde_json` (QA and Wikidata JSON),
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

pub use error::IngestError;
pub use input::{InputCtx, LocalFs, Opener};
pub use range::ByteRange;
pub use split::{find_multistream_index, split_ranges};

/// Reads one input file of `format` into `sink` (the part [`InputCtx::range`] names, when
/// set; an error for a range that cuts a file that cannot be split).
pub fn read_input(
    format: Format,
    ctx: &InputCtx<'_>,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    if range::Shape::of(format) == range::Shape::Other {
        // Readers of these formats know nothing of ranges: accept only a whole-file one.
        range::read_mode(range::Shape::Other, ctx)?;
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
    }
}
