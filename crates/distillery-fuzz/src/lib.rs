//! Fuzz targets for every parser of Distillery, runnable on stable Rust.
//!
//! Each target is a function `fn(&[u8])` that drives a real parser entry point on arbitrary
//! bytes and ignores what it returns: an `Err` or a quarantined record is the parser doing its
//! job; a panic, an abort, a hang or a memory blow-up is a bug. [`TARGETS`] lists them:
//!
//! | target | drives |
//! |---|---|
//! | `wikitext` | the wikitext cleaner (sections, paragraphs, tables, infobox, links): the bytes as a page's `<text>` in a one-page dump, read by the `mediawiki` reader |
//! | `mediawiki` | a whole MediaWiki XML dump (page splitter, quick-xml page parser, cleaner), plain or compressed |
//! | `multistream_index` | a multistream dump's `-index.txt` against a fixed 5-stream dump (ranges planned from it, each range read), or a fuzzed multistream bz2 dump (stream scanner, parallel decoding, ranges found by scanning) |
//! | `ntriples` | the Freebase N-Triples reader, plain or gzip (the parallel line parser), whole or in byte ranges |
//! | `wikidata` | the Wikidata JSON dump reader, plain or gzip, whole or in byte ranges |
//! | `json_array` | the JSON-array / JSON-lines splitter `jsonstream::JsonItems` |
//! | `qa` | every QA and KGQA reader (and FB15k, MetaQA KB, WikiOFGraph), with fuzzed side files |
//! | `teacher` | the teacher answer parsers: triples and entities JSON, RAS triple strings, planner, relevance, support, CIRAG, cascade, compound, RAS sub-queries |
//! | `pipeline` | the pipeline TOML parser and checks with `--set` overrides (no path checks) |
//! | `search_query` | the query strings of `distillery search` (BM25 over a small tantivy index) |
//!
//! The first byte of a target's input often selects a variant (a format, a parser, flags);
//! [`corpus`] turns the human-readable seed files of `fuzz/seeds/<target>/` and slices of the
//! shared samples into inputs with that byte. Side files (a HybridQA table, an FB15k name map,
//! a MetaQA qtype file) follow the main file after a line `--side--` ([`SIDE`]).
//!
//! Two drivers use these functions. `cargo test -p distillery-fuzz` (so CI) replays the seeds
//! and `fuzz/regressions/<target>/` and runs the deterministic mutator of [`mutate`] for
//! `DISTILLERY_FUZZ_SMOKE_SECS` seconds per target (default 2). `scripts/fuzz.sh TARGET
//! SECONDS` builds the `fuzz/` crate, one libFuzzer binary per target (coverage-guided,
//! instrumented with the sanitizer-coverage passes on stable rustc), outside this workspace so
//! `libfuzzer-sys` and its C++ build stay out of it.
//!
//! Readers read from memory ([`mem::MemFs`]) into a sink that counts and drops records
//! ([`mem::CountSink`]); nothing is written to disk per input (the `search_query` target builds
//! its index once per process, in a temporary directory named by its pid).
//!
//! Dependencies: the crates whose parsers are fuzzed; `bzip2` and `flate2` to build the
//! compressed variants (multistream dumps, gzip KG files) the readers take apart; `fastrand`
//! for the mutator's fixed-seed generator.

pub mod corpus;
pub mod mem;
pub mod mutate;

use std::io::{Cursor, Write};
use std::sync::OnceLock;

use distillery_core::spec::{Format, FormatOptions};
use distillery_ingest::{InputCtx, read_input, split_ranges};

use mem::{CountSink, MemFs};

/// A fuzz target: runs a parser on one input.
pub type Target = fn(&[u8]);

/// Every target, by name.
pub const TARGETS: &[(&str, Target)] = &[
    ("wikitext", wikitext),
    ("mediawiki", mediawiki),
    ("multistream_index", multistream_index),
    ("ntriples", ntriples),
    ("wikidata", wikidata),
    ("json_array", json_array),
    ("qa", qa),
    ("teacher", teacher),
    ("pipeline", pipeline),
    ("search_query", search_query),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// The line that separates a main file from its side files.
pub const SIDE: &[u8] = b"\n--side--\n";

/// Splits `data` at [`SIDE`] lines: the main file, then the side files.
pub fn parts(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(i) = find(rest, SIDE) {
        out.push(&rest[..i]);
        rest = &rest[i + SIDE.len()..];
    }
    out.push(rest);
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The first byte (a selector or flags) and the rest; `None` for an empty input.
fn split_first(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(b, rest)| (*b, rest))
}

/// Reads `location` of `fs` with `format`, whole, then in about three byte ranges when
/// `ranged` (planned by `split_ranges`, as the executor does). Only panics matter.
fn read_mem(fs: &MemFs, location: &str, format: Format, options: &FormatOptions, ranged: bool) {
    let ctx = InputCtx::opened_by(location, options, fs);
    let shards = if ranged { 4 } else { 0 };
    let mut sink = if shards > 0 {
        CountSink::sharded(shards)
    } else {
        CountSink::default()
    };
    let _ = read_input(format, &ctx, &mut sink);
    if ranged {
        read_ranges(fs, location, format, options, None);
    }
}

fn read_ranges(
    fs: &MemFs,
    location: &str,
    format: Format,
    options: &FormatOptions,
    index: Option<&str>,
) {
    let ctx = InputCtx::opened_by(location, options, fs);
    let size = distillery_ingest::Opener::size(fs, location).unwrap_or(0);
    let target = (size / 3).max(1);
    let Ok(ranges) = split_ranges(format, &ctx, target, index) else {
        return;
    };
    for r in ranges {
        let ctx = InputCtx::opened_by(location, options, fs).with_range(r);
        let _ = read_input(format, &ctx, &mut CountSink::default());
    }
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

fn bz2(data: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

/// One `<page>` of a dump.
fn page_xml(title: &str, id: u64, ns: i32, text: &str) -> String {
    format!(
        "  <page>\n    <title>{}</title>\n    <ns>{ns}</ns>\n    <id>{id}</id>\n    <revision>\n      \
         <id>{}</id>\n      <timestamp>2024-01-01T00:00:00Z</timestamp>\n      \
         <model>wikitext</model>\n      <format>text/x-wiki</format>\n      \
         <text bytes=\"{}\" xml:space=\"preserve\">{}</text>\n    </revision>\n  </page>\n",
        xml_escape(title),
        id * 10,
        text.len(),
        xml_escape(text),
    )
}

const MW_HEAD: &str = "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.10/\" version=\"0.10\" \
xml:lang=\"en\">\n  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <dbname>enwiki</dbname>\n    \
<namespaces>\n      <namespace key=\"0\" case=\"first-letter\" />\n    </namespaces>\n  </siteinfo>\n";
const MW_TAIL: &str = "</mediawiki>\n";

fn mediawiki_options(keep_all: bool) -> FormatOptions {
    let mut o = distillery_core::spec::MediaWikiOptions::default();
    if keep_all {
        o.namespaces.clear();
    }
    FormatOptions::MediaWiki(o)
}

/// `wikitext`: the bytes (lossily UTF-8) as the wikitext of one page, read by the
/// `mediawiki` reader: the cleaner, the table layout, sentences and spans.
pub fn wikitext(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let dump = format!("{MW_HEAD}{}{MW_TAIL}", page_xml("Fuzz page", 1, 0, &text));
    let fs = MemFs::new().file("/fuzz/enwiki-pages-articles.xml", dump.as_bytes());
    read_mem(
        &fs,
        "/fuzz/enwiki-pages-articles.xml",
        Format::MediaWiki,
        &mediawiki_options(false),
        false,
    );
}

/// `mediawiki`: the bytes as a whole dump (plain, or bz2/gzip when they start so); an odd
/// length keeps every namespace.
pub fn mediawiki(data: &[u8]) {
    let fs = MemFs::new().file("/fuzz/enwiki-pages-articles.xml", data);
    read_mem(
        &fs,
        "/fuzz/enwiki-pages-articles.xml",
        Format::MediaWiki,
        &mediawiki_options(data.len() % 2 == 1),
        false,
    );
}

const MS_DUMP: &str = "/fuzz/enwiki-20240601-pages-articles-multistream.xml.bz2";
const MS_INDEX: &str = "/fuzz/enwiki-20240601-pages-articles-multistream-index.txt";

/// A real-layout multistream dump (siteinfo, then pages two per stream, then the closing tag,
/// each its own bz2 stream) and its index.
pub fn multistream_dump() -> &'static (Vec<u8>, String) {
    static DUMP: OnceLock<(Vec<u8>, String)> = OnceLock::new();
    DUMP.get_or_init(|| {
        let pages = [
            ("Alpha", "'''Alpha''' is the [[first letter]].\n\n== History ==\nIt came from ''aleph''."),
            ("Beta", "{{Infobox letter|name=Beta|script=Greek}}\n'''Beta''' is second.<ref>x</ref>"),
            ("Gamma", "#REDIRECT [[Gamma (letter)]]"),
            ("Delta", "'''Delta''' has a table.\n{| class=\"wikitable\"\n! A !! B\n|-\n| 1 || 2\n|}\nEnd."),
            ("Epsilon", "'''Epsilon''' is fifth. It is a vowel. See [[Eta|the next]]."),
            ("Zeta", "== Only heading ==\n* a list\n* of items\n[[Category:Letters]]"),
        ];
        let mut dump = bz2(MW_HEAD.as_bytes());
        let mut index = String::new();
        for (n, pair) in pages.chunks(2).enumerate() {
            let offset = dump.len();
            let mut xml = String::new();
            for (i, (title, text)) in pair.iter().enumerate() {
                let id = (n * 2 + i + 1) as u64;
                xml.push_str(&page_xml(title, id, 0, text));
                index.push_str(&format!("{offset}:{id}:{title}\n"));
            }
            dump.extend(bz2(xml.as_bytes()));
        }
        dump.extend(bz2(MW_TAIL.as_bytes()));
        (dump, index)
    })
}

/// `multistream_index`: an even first byte makes the rest the index of the fixed
/// [`multistream_dump`] (ranges planned from it and read; the index found beside the dump); an
/// odd one makes the rest a multistream dump itself (read in parallel, and in ranges found by
/// scanning).
pub fn multistream_index(data: &[u8]) {
    let Some((sel, rest)) = split_first(data) else {
        return;
    };
    let options = mediawiki_options(false);
    if sel % 2 == 0 {
        let (dump, _) = multistream_dump();
        let fs = MemFs::new().file(MS_DUMP, dump).file(MS_INDEX, rest);
        let index = distillery_ingest::find_multistream_index(&fs, MS_DUMP);
        read_ranges(&fs, MS_DUMP, Format::MediaWiki, &options, index.as_deref());
    } else {
        let fs = MemFs::new().file(MS_DUMP, rest);
        let ctx = InputCtx::opened_by(MS_DUMP, &options, &fs);
        let _ = read_input(Format::MediaWiki, &ctx, &mut CountSink::default());
        read_ranges(&fs, MS_DUMP, Format::MediaWiki, &options, None);
    }
}

/// Flags of the KG line targets: bit 0 gzip (decompressed on one thread, parsed on others),
/// bit 1 also read in byte ranges; the rest are the format's own.
fn kg_input(flags: u8, rest: &[u8], name: &str) -> (MemFs, String) {
    let (location, bytes) = if flags & 1 == 1 {
        (format!("/fuzz/{name}.gz"), gzip(rest))
    } else {
        (format!("/fuzz/{name}"), rest.to_vec())
    };
    (MemFs::new().file(&location, &bytes), location)
}

/// `ntriples`: a Freebase N-Triples dump; first byte flags: 1 gzip, 2 byte ranges, 4 no
/// English filter, 8 no names.
pub fn ntriples(data: &[u8]) {
    let Some((flags, rest)) = split_first(data) else {
        return;
    };
    let (fs, location) = kg_input(flags, rest, "freebase-rdf-latest.nt");
    let options = FormatOptions::Freebase(distillery_core::spec::FreebaseOptions {
        english_only: flags & 4 == 0,
        names: flags & 8 == 0,
        ..Default::default()
    });
    read_mem(&fs, &location, Format::Freebase, &options, flags & 2 == 2);
}

/// `wikidata`: a Wikidata JSON dump; first byte flags: 1 gzip, 2 byte ranges, 4 languages
/// `en` and `de` (else all of them: none listed).
pub fn wikidata(data: &[u8]) {
    let Some((flags, rest)) = split_first(data) else {
        return;
    };
    let (fs, location) = kg_input(flags, rest, "latest-all.json");
    let languages = if flags & 4 == 0 {
        vec!["en".to_string(), "de".to_string()]
    } else {
        Vec::new()
    };
    let options = FormatOptions::Wikidata(distillery_core::spec::WikidataOptions {
        languages,
        ..Default::default()
    });
    read_mem(&fs, &location, Format::Wikidata, &options, flags & 2 == 2);
}

/// `json_array`: the JSON splitter over the bytes; first byte: bit 0 a small item limit (the
/// `TooLarge` path), bit 1 start at a nonzero offset, bits 2.. the excerpt size.
pub fn json_array(data: &[u8]) {
    let Some((flags, rest)) = split_first(data) else {
        return;
    };
    let reader = Cursor::new(rest);
    let mut items = if flags & 2 == 2 {
        distillery_ingest::jsonstream::JsonItems::starting_at(reader, 1 << 40)
    } else {
        distillery_ingest::jsonstream::JsonItems::new(reader)
    };
    if flags & 1 == 1 {
        items.max_item = 64;
    }
    items.max_excerpt = usize::from(flags >> 2);
    // Every item takes at least one byte, and the splitter stops after an error: more items
    // than bytes means it does not end.
    let bound = rest.len() + 2;
    for (n, _) in items.enumerate() {
        assert!(
            n <= bound,
            "JsonItems yields more items than its input has bytes"
        );
    }
}

/// The formats of the `qa` target, by selector byte (modulo the count).
pub const QA_FORMATS: &[Format] = &[
    Format::HotpotQa,
    Format::Musique,
    Format::TwoWiki,
    Format::HybridQa,
    Format::TatQa,
    Format::MetaQa,
    Format::Cwq,
    Format::SimpleQa,
    Format::WebQuestions,
    Format::WebQsp,
    Format::Qald,
    Format::HotpotAdv,
    Format::ZeroShotRe,
    Format::CommonsenseQa,
    Format::NqOpen,
    Format::Fb15k,
    Format::MetaQaKb,
    Format::WikiOfGraph,
    Format::MediaWikiLog,
];

/// `qa`: the first byte selects the format ([`QA_FORMATS`]); the rest is the question (or
/// triple) file, then side files after [`SIDE`] lines: HybridQA's table and passage files,
/// FB15k's name map, MetaQA's qtype file. A byte of 128 or more also reads in byte ranges.
pub fn qa(data: &[u8]) {
    let Some((sel, rest)) = split_first(data) else {
        return;
    };
    let format = QA_FORMATS[usize::from(sel) % QA_FORMATS.len()];
    let parts = parts(rest);
    let (main, side) = (parts[0], &parts[1..]);
    let mut options = FormatOptions::default_for(format);
    let location = match format {
        Format::MetaQa => "/fuzz/metaqa/2-hop/qa_test.txt",
        Format::Fb15k | Format::MetaQaKb => "/fuzz/kb/test.txt",
        Format::WikiOfGraph => "/fuzz/wikiofgraph/train.jsonl",
        _ => "/fuzz/qa/dev.json",
    };
    let mut fs = MemFs::new().file(location, main);
    match format {
        Format::HybridQa => {
            if let Some(t) = side.first() {
                fs = fs.any_in("/fuzz/qa/WikiTables-WithLinks/tables_tok", t);
            }
            if let Some(p) = side.get(1) {
                fs = fs.any_in("/fuzz/qa/WikiTables-WithLinks/request_tok", p);
            }
        }
        Format::Fb15k => {
            let mut names = Vec::new();
            for (i, s) in side.iter().enumerate() {
                let loc = format!("/fuzz/kb/names{i}.txt");
                fs = fs.file(&loc, s);
                names.push(loc);
            }
            names.push("/fuzz/kb/absent.txt".to_string());
            options = FormatOptions::Fb15k(distillery_core::spec::Fb15kOptions {
                names,
                ..Default::default()
            });
        }
        Format::MetaQa => {
            if let Some(q) = side.first() {
                fs = fs.file("/fuzz/metaqa/2-hop/qa_test_qtype.txt", q);
            }
        }
        _ => {}
    }
    read_mem(&fs, location, format, &options, sel >= 128);
}

/// `teacher`: the first byte selects a parser of teacher answers, fed the rest as text.
pub fn teacher(data: &[u8]) {
    use distillery_distill::{cascade, cirag, compound, planner, ras, relevance, support};
    use distillery_triples::parse;
    let Some((sel, rest)) = split_first(data) else {
        return;
    };
    let raw = String::from_utf8_lossy(rest);
    let raw = raw.as_ref();
    match sel % 16 {
        0 => {
            if let Ok((v, _)) = parse::extract_json(raw) {
                let _ = parse::entities_of(&v);
                let _ = parse::triples_of(&v);
            }
        }
        1 => drop(parse::parse_entities(raw)),
        2 => drop(parse::parse_triples(raw)),
        3 => {
            let triples = distillery_core::ras_form::parse(raw);
            let _ = distillery_core::ras_form::normalise(raw);
            // What RAS writes back is parsed again by the student's tooling.
            let _ = distillery_core::ras_form::parse(&distillery_core::ras_form::render(&triples));
        }
        4 => drop(planner::parse_plan(raw)),
        5 => drop(relevance::parse_relevance(raw)),
        6 => drop(support::parse_support(raw)),
        7 => drop(cirag::parse_decision(raw)),
        8 => drop(cirag::parse_answer(raw)),
        9 => drop(cascade::parse_generation(raw)),
        10 => drop(compound::parse_qa(raw)),
        11 => drop(compound::parse_combination(raw)),
        12 => drop(ras::parse_subquery(raw)),
        13 => drop(ras::parse_base_answer(raw)),
        14 => {
            let _ = distillery_core::ras_form::py_repr_str(raw);
            let _ = ras::graph_repr(&distillery_core::ras_form::parse(raw));
        }
        _ => {
            if let Ok(d) = cirag::parse_decision(raw) {
                let _ = cirag::render_target(&d);
            }
        }
    }
}

/// `pipeline`: the bytes (lossily UTF-8) as a pipeline file, parsed and checked with this
/// build's stages; lines after a [`SIDE`] line are `--set` overrides. Paths are not checked.
pub fn pipeline(data: &[u8]) {
    let parts = parts(data);
    let text = String::from_utf8_lossy(parts[0]);
    let overrides: Vec<String> = parts[1..]
        .iter()
        .flat_map(|p| {
            String::from_utf8_lossy(p)
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    let _ = distillery_exec::stages::parse_pipeline("fuzz.toml", &text, &overrides);
}

struct SearchIndex {
    disk: distillery_index::bm25::Bm25Reader,
    ram: distillery_index::Bm25Index,
}

const SEARCH_PASSAGES: &[(&str, &str)] = &[
    ("Alpha", "Alpha is the first letter of the Greek alphabet."),
    (
        "Beta",
        "Beta is the second letter; beta testing came later.",
    ),
    (
        "Gamma ray",
        "Gamma rays are penetrating electromagnetic radiation.",
    ),
    (
        "Ünïcödé",
        "Texte en français, 日本語のテキスト, и русский текст.",
    ),
    ("Numbers", "1999 2024 3.14159 -42 1e10 0x1F"),
    ("Empty title", ""),
];

const INDEX_DIR_PREFIX: &str = "distillery-fuzz-bm25-";

/// This process's index directory in the temporary directory, named by its pid. A static is
/// never dropped, so the directories of processes that are gone are removed here instead.
fn index_dir() -> std::path::PathBuf {
    let tmp = std::env::temp_dir();
    if std::path::Path::new("/proc/self").exists()
        && let Ok(entries) = std::fs::read_dir(&tmp)
    {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name.strip_prefix(INDEX_DIR_PREFIX) else {
                continue;
            };
            let ours = pid == std::process::id().to_string();
            if ours || !std::path::Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    tmp.join(format!("{INDEX_DIR_PREFIX}{}", std::process::id()))
}

fn search_index() -> &'static SearchIndex {
    static INDEX: OnceLock<SearchIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        use distillery_index::passage::Passage;
        let passages: Vec<Passage> = SEARCH_PASSAGES
            .iter()
            .enumerate()
            .map(|(i, (title, text))| {
                Passage::new(
                    format!("p{i:04}"),
                    format!("d{i:04}"),
                    title.to_string(),
                    text.to_string(),
                )
            })
            .collect();
        let refs: Vec<&Passage> = passages.iter().collect();
        let path = index_dir();
        distillery_index::bm25::build(&path, &refs).expect("building the search index");
        let disk = distillery_index::bm25::Bm25Reader::open(&path).expect("opening the index");
        let ram = distillery_index::Bm25Index::build(
            SEARCH_PASSAGES
                .iter()
                .enumerate()
                .map(|(i, (t, x))| (i as u64, *t, *x)),
        )
        .expect("building the in-memory index");
        SearchIndex { disk, ram }
    })
}

/// `search_query`: the first byte is `k`, the rest (lossily UTF-8) the query, asked of the
/// on-disk BM25 index `distillery search` reads and of the in-memory one of CIRAG.
pub fn search_query(data: &[u8]) {
    let Some((k, rest)) = split_first(data) else {
        return;
    };
    let query = String::from_utf8_lossy(rest);
    let index = search_index();
    let _ = index.disk.search(&query, usize::from(k));
    let _ = index.ram.search(&query, usize::from(k));
}
