//! Tests of the mediawiki readers.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use distillery_core::id::stable_id;
use distillery_core::spec::{Format, FormatOptions, MediaWikiOptions};
use distillery_core::{CellLink, Document, Record, Table, VecSink, char_slice};
use distillery_ingest::{InputCtx, read_input};

use crate::common::{bundled, read, read_with, shared};

fn options(f: impl FnOnce(&mut MediaWikiOptions)) -> FormatOptions {
    let mut o = MediaWikiOptions::default();
    f(&mut o);
    FormatOptions::MediaWiki(o)
}

fn sequential() -> FormatOptions {
    options(|o| o.parallel_streams = false)
}

fn bz2(data: &[u8], level: u32) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(level));
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Every span of a document is a valid char range of its text, nested as documented.
fn assert_spans(d: &Document) {
    let t = &d.text;
    let ctx = &d.title;
    for s in &d.sections {
        let body = char_slice(t, s.start, s.end)
            .unwrap_or_else(|| panic!("{ctx}: section {s:?} out of range"));
        assert!(s.level >= 1, "{ctx}: {s:?}");
        if s.level > 1 {
            assert!(
                body.starts_with(&s.title),
                "{ctx}: section {s:?} is {body:?}"
            );
        }
    }
    for w in d.sections.windows(2) {
        assert!(w[0].start <= w[1].start, "{ctx}: sections out of order");
    }
    for p in &d.paragraphs {
        let s = &d.sections[p.section as usize];
        assert!(
            s.start <= p.start && p.end <= s.end,
            "{ctx}: {p:?} outside {s:?}"
        );
        let body = char_slice(t, p.start, p.end).expect("paragraph in range");
        assert!(
            !body.is_empty() && body.trim() == body,
            "{ctx}: paragraph {body:?}"
        );
    }
    for w in d.paragraphs.windows(2) {
        assert!(w[0].end < w[1].start, "{ctx}: paragraphs overlap");
    }
    for s in &d.sentences {
        let p = &d.paragraphs[s.paragraph as usize];
        assert!(
            p.start <= s.start && s.end <= p.end,
            "{ctx}: {s:?} outside {p:?}"
        );
        let body = char_slice(t, s.start, s.end).expect("sentence in range");
        assert!(
            !body.is_empty() && body.trim() == body,
            "{ctx}: sentence {body:?}"
        );
    }
    for l in &d.links {
        let a = char_slice(t, l.start, l.end).unwrap_or_else(|| panic!("{ctx}: {l:?}"));
        assert!(
            !a.is_empty() && a.trim() == a,
            "{ctx}: link {l:?} anchors {a:?}"
        );
        assert!(!l.target.is_empty());
    }
}

/// Tables are rectangular, their links point into the grid and they follow their document.
fn assert_tables(sink: &VecSink) {
    let mut doc: Option<&Document> = None;
    let mut next_index = 0;
    for r in &sink.records {
        match r {
            Record::Document(d) => {
                doc = Some(d);
                next_index = 0;
            }
            Record::Table(t) => {
                let d = doc.expect("a table follows its document");
                assert_eq!(t.document_id.as_deref(), Some(d.id.as_str()));
                assert_eq!(t.table_index, next_index);
                next_index += 1;
                assert_eq!(t.title, d.title);
                assert_eq!(t.uri, format!("enwiki:{}#table{}", d.title, t.table_index));
                assert!(!t.header.is_empty());
                for row in &t.rows {
                    assert_eq!(row.len(), t.header.len(), "{}#{}", t.title, t.table_index);
                }
                for l in &t.links {
                    assert!(l.row >= -1 && l.row < t.rows.len() as i32, "{l:?}");
                    assert!(l.col >= 0 && (l.col as usize) < t.header.len(), "{l:?}");
                }
            }
            _ => {}
        }
    }
}

#[test]
fn shared_sample_reads_every_page() {
    let Some(p) = shared("wikipedia_xml/enwiki-table-markup.xml.bz2") else {
        return;
    };
    let sink = read(Format::MediaWiki, &p);
    assert!(sink.quarantine().is_empty(), "{:?}", sink.quarantine());
    let docs = sink.documents();
    let titles: Vec<&str> = docs.iter().map(|d| d.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Constructive vote of no confidence",
            "List of Prison Break characters",
            "Academy Award for Best Production Design",
            "Economy of Estonia",
            "Brahui language"
        ]
    );
    for d in &docs {
        assert_spans(d);
        assert_eq!(d.dataset, "mediawiki");
        assert_eq!(d.source, "enwiki-table-markup.xml.bz2");
        assert_eq!(d.uri, format!("enwiki:{}", d.title));
        assert_eq!(d.namespace, Some(0));
        let rev = d.revision_id.unwrap().to_string();
        assert_eq!(d.id, stable_id(&["mediawiki", &d.source, &d.title, &rev]));
        assert!(d.timestamp.is_some() && d.page_id.is_some());
        assert!(!d.paragraphs.is_empty() && !d.sentences.is_empty() && !d.links.is_empty());
        for bad in ["{{", "}}", "[[", "]]", "<ref", "'''", "&lt;", "&nbsp;"] {
            assert!(
                !d.text.contains(bad),
                "{}: {bad:?} left in the text",
                d.title
            );
        }
    }
    assert_eq!(docs[0].page_id, Some(217916));
    assert_eq!(docs[0].revision_id, Some(807605030));
    assert_eq!(docs[0].timestamp.as_deref(), Some("2017-10-29T00:56:32Z"));
    assert!(docs[0].text.starts_with(
        "The constructive vote of no confidence (in German: konstruktives Misstrauensvotum,"
    ));
    assert_eq!(docs[0].sections[0].title, docs[0].title);
    assert!(
        docs[0]
            .sections
            .iter()
            .any(|s| s.title == "History of use" && s.level == 3)
    );

    // Tables: every page has some; rectangular; the first one exactly.
    let tables = sink.tables();
    assert_tables(&sink);
    for d in &docs {
        assert!(
            tables
                .iter()
                .any(|t| t.document_id.as_deref() == Some(&d.id)),
            "{} has no table",
            d.title
        );
    }
    let t0 = tables[0];
    assert_eq!(t0.section.as_deref(), Some("History of use"));
    assert_eq!(
        t0.header,
        [
            "Date",
            "Opposition candidate (party)",
            "Chancellor (party)",
            "Yes",
            "No",
            "Abstention",
            "absent/invalid",
            "Vote successful?"
        ]
    );
    assert_eq!(
        t0.rows[0],
        [
            "27 April 1972",
            "Rainer Barzel (CDU)",
            "Willy Brandt (SPD)",
            "247",
            "10",
            "3",
            "236",
            "no"
        ]
    );
    assert!(t0.links.contains(&CellLink {
        row: 0,
        col: 1,
        target: "Rainer Barzel".into()
    }));
    // A rowspan in the award tables repeats the year in the rows it covers.
    let awards = tables
        .iter()
        .find(|t| t.section.as_deref() == Some("1920s"))
        .unwrap();
    assert_eq!(awards.header, ["Year", "Interior decorator", "Film"]);
    assert_eq!(
        awards.rows[1],
        ["1927/28 (1st)", "William Cameron Menzies", "The Dove"]
    );
    assert_eq!(
        awards.rows[2],
        ["1927/28 (1st)", "William Cameron Menzies", "Tempest"]
    );
    // A colspan header repeats its name; a generated name fills the empty corner.
    let consonants = tables
        .iter()
        .find(|t| t.title == "Brahui language")
        .unwrap();
    assert_eq!(consonants.header[..3], ["col_1", "Labial", "Labial"]);
    assert_eq!(consonants.rows[1][..3], ["Stop", "p", "b"]);

    // Infoboxes.
    let field = |d: &Document, key: &str| -> Option<String> {
        d.infobox
            .iter()
            .find(|f| f.key == key)
            .map(|f| f.value.clone())
    };
    assert_eq!(docs[2].infobox[0].template, "Infobox award");
    assert_eq!(
        field(docs[2], "presenter").as_deref(),
        Some("Academy of Motion Picture Arts and Sciences (AMPAS)")
    );
    assert_eq!(field(docs[3], "country").as_deref(), Some("Estonia"));
    assert_eq!(
        field(docs[3], "gdp").as_deref(),
        Some("$36.947 billion (PPP, 2015 est.)")
    );
    assert_eq!(
        field(docs[4], "region").as_deref(),
        Some("Pakistan, Afghanistan, Iran, Turkmenistan")
    );
    assert_eq!(field(docs[4], "iso3").as_deref(), Some("brh"));

    let fields: usize = docs.iter().map(|d| d.infobox.len()).sum();
    let sentences: usize = docs.iter().map(|d| d.sentences.len()).sum();
    eprintln!(
        "enwiki-table-markup: {} pages, {} tables, {} infobox fields, {} sentences",
        docs.len(),
        tables.len(),
        fields,
        sentences
    );
    assert!(tables.len() >= 15 && fields >= 50 && sentences >= 500);
}

#[test]
fn shared_sample_sequential_equals_default() {
    let Some(p) = shared("wikipedia_xml/enwiki-table-markup.xml.bz2") else {
        return;
    };
    // A single-stream bz2 file: the parallel path declines it, the output is the same.
    let a = read(Format::MediaWiki, &p);
    let b = read_with(Format::MediaWiki, sequential(), &p);
    assert_eq!(a.records, b.records);
}

#[test]
fn quickstart_wiki() {
    let p = bundled("quickstart/wiki.xml");
    assert!(std::fs::metadata(&p).unwrap().len() < 15 * 1024);
    let sink = read(Format::MediaWiki, &p);
    assert!(sink.quarantine().is_empty(), "{:?}", sink.quarantine());
    let docs = sink.documents();
    // The category page (namespace 14) is filtered out by default.
    let titles: Vec<&str> = docs.iter().map(|d| d.title.as_str()).collect();
    assert_eq!(
        titles,
        ["Lake Varnholm", "Varnholm Ferry Company", "Varnholm Lake"]
    );
    for d in &docs {
        assert_spans(d);
    }

    let lake = docs[0];
    assert_eq!(
        lake.id,
        stable_id(&["mediawiki", "wiki.xml", "Lake Varnholm", "9001"])
    );
    assert_eq!(lake.uri, "enwiki:Lake Varnholm");
    assert_eq!((lake.page_id, lake.revision_id), (Some(101), Some(9001)));
    assert_eq!(lake.timestamp.as_deref(), Some("2024-03-14T09:26:53Z"));
    assert_eq!(lake.redirect, None);
    assert_eq!(
        lake.text,
        "Lake Varnholm is a long, narrow lake in the hills of Osterland. It was carved by a \
         retreating glacier and is fed mostly by the Tessel River. The town of Varnholm sits on \
         its northern shore.\n\n\
         Fishing and ferry traffic have shaped the lake for centuries.\n\n\
         Geography\n\n\
         The lake is about 19 kilometres long but rarely wider than three. Its deepest point, \
         near the island of Skarv, lies some 61 metres below the surface.\n\n\
         Islands\n\n\
         Skarv, the largest island, with a small lighthouse\n\
         Little Holm, a rocky islet used by nesting gulls\n\n\
         Transport\n\n\
         Two operators run ferries across the lake. The northern crossing is the busiest route.\n\n\
         Winter ice usually ends ferry service in late December.\n\n\
         See also\n\n\
         Varnholm Ferry Company\n\
         Lake Varnholm visitor guide"
    );
    let sections: Vec<(&str, u32)> = lake
        .sections
        .iter()
        .map(|s| (s.title.as_str(), s.level))
        .collect();
    assert_eq!(
        sections,
        [
            ("Lake Varnholm", 1),
            ("Geography", 2),
            ("Islands", 3),
            ("Transport", 2),
            ("See also", 2)
        ]
    );
    let geo = &lake.sections[1];
    assert_eq!(
        char_slice(&lake.text, geo.start, geo.end).unwrap(),
        "Geography\n\nThe lake is about 19 kilometres long but rarely wider than three. Its \
         deepest point, near the island of Skarv, lies some 61 metres below the surface.\n\n\
         Islands\n\nSkarv, the largest island, with a small lighthouse\n\
         Little Holm, a rocky islet used by nesting gulls"
    );
    assert_eq!(lake.paragraphs.len(), 7);
    assert_eq!(
        lake.paragraphs
            .iter()
            .map(|p| p.section)
            .collect::<Vec<_>>(),
        [0, 0, 1, 2, 3, 3, 4]
    );
    let sentences: Vec<&str> = lake
        .sentences
        .iter()
        .map(|s| char_slice(&lake.text, s.start, s.end).unwrap())
        .collect();
    assert_eq!(
        sentences[..3],
        [
            "Lake Varnholm is a long, narrow lake in the hills of Osterland.",
            "It was carved by a retreating glacier and is fed mostly by the Tessel River.",
            "The town of Varnholm sits on its northern shore."
        ]
    );
    let links: Vec<(&str, &str)> = lake
        .links
        .iter()
        .map(|l| {
            (
                l.target.as_str(),
                char_slice(&lake.text, l.start, l.end).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        links,
        [
            ("Osterland", "Osterland"),
            ("Varnholm", "Varnholm"),
            ("Skarv", "Skarv"),
            ("Skarv", "Skarv"),
            ("Varnholm Ferry Company", "Varnholm Ferry Company"),
            (
                "http://example.invalid/varnholm",
                "Lake Varnholm visitor guide"
            ),
        ]
    );
    let infobox: Vec<(&str, &str)> = lake
        .infobox
        .iter()
        .map(|f| (f.key.as_str(), f.value.as_str()))
        .collect();
    assert_eq!(
        infobox,
        [
            ("name", "Lake Varnholm"),
            ("image", "Varnholm from the north.jpg"),
            ("location", "Osterland"),
            ("type", "Glacial lake"),
            ("inflow", "Tessel River"),
            ("outflow", "the Varn"),
            ("area", "42 km2"),
            ("max depth", "61 m"),
            ("elevation", "212 m"),
        ]
    );
    assert!(
        lake.infobox
            .iter()
            .all(|f| f.template == "Infobox body of water")
    );

    // The ferry table: header row, rowspan and colspan expanded, links per cell.
    let tables = sink.tables();
    assert_eq!(tables.len(), 1);
    let t: &Table = tables[0];
    assert_eq!(t.document_id.as_deref(), Some(lake.id.as_str()));
    assert_eq!(t.uri, "enwiki:Lake Varnholm#table0");
    assert_eq!(t.table_index, 0);
    assert_eq!(t.title, "Lake Varnholm");
    assert_eq!(t.caption.as_deref(), Some("Ferry routes on the lake"));
    assert_eq!(t.section.as_deref(), Some("Transport"));
    assert_eq!(
        t.header,
        ["Route", "Operator", "Departures", "Crossing time"]
    );
    assert_eq!(
        t.rows,
        [
            [
                "Northern crossing",
                "Varnholm Ferry Company",
                "6 daily",
                "25 minutes"
            ],
            [
                "Northern crossing",
                "Boat Cooperative",
                "2 daily",
                "30 minutes"
            ],
            [
                "Southern loop",
                "Suspended since 2019",
                "Suspended since 2019",
                "50 minutes"
            ],
        ]
    );
    let cell = |row: i32, col: i32, target: &str| CellLink {
        row,
        col,
        target: target.into(),
    };
    assert_eq!(
        t.links,
        [
            cell(0, 0, "Northern crossing"),
            cell(0, 1, "Varnholm Ferry Company"),
            cell(1, 0, "Northern crossing"),
            cell(1, 1, "Osterland Boat Cooperative"),
            cell(2, 0, "Southern loop"),
        ]
    );
    assert_tables(&sink);
    let again = read(Format::MediaWiki, &p);
    assert_eq!(again.tables()[0].id, t.id, "table ids are deterministic");

    let ferry = docs[1];
    assert_eq!(
        ferry
            .sections
            .iter()
            .map(|s| s.title.as_str())
            .collect::<Vec<_>>(),
        ["Varnholm Ferry Company", "History", "Fleet", "References"]
    );
    assert!(ferry.text.contains("the Tessel. Diesel boats"));

    let redirect = docs[2];
    assert_eq!(redirect.redirect.as_deref(), Some("Lake Varnholm"));
    assert_eq!(redirect.text, "");
    assert!(redirect.sections.is_empty() && redirect.links.is_empty());
}

#[test]
fn quickstart_options() {
    let p = bundled("quickstart/wiki.xml");
    let all = read_with(
        Format::MediaWiki,
        options(|o| {
            o.namespaces = Vec::new();
            o.wiki = Some("quickwiki".into());
        }),
        &p,
    );
    let docs = all.documents();
    assert_eq!(docs.len(), 4);
    let cat = docs[3];
    assert_eq!(cat.title, "Category:Lakes of Osterland");
    assert_eq!(cat.namespace, Some(14));
    assert_eq!(cat.uri, "quickwiki:Category:Lakes of Osterland");
    assert_eq!(cat.text, "Lakes in the fictional region of Osterland.");
    assert_eq!(all.tables()[0].uri, "quickwiki:Lake Varnholm#table0");

    let only_cats = read_with(Format::MediaWiki, options(|o| o.namespaces = vec![14]), &p);
    assert_eq!(only_cats.documents().len(), 1);
    assert!(only_cats.tables().is_empty());

    let no_redirects = read_with(Format::MediaWiki, options(|o| o.redirects = false), &p);
    let titles: Vec<&str> = no_redirects
        .documents()
        .iter()
        .map(|d| d.title.as_str())
        .collect();
    assert_eq!(titles, ["Lake Varnholm", "Varnholm Ferry Company"]);
}

#[test]
fn compressed_quickstart_reads_the_same() {
    let plain = bundled("quickstart/wiki.xml");
    let xml = std::fs::read(&plain).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bz = dir.path().join("wiki.xml");
    std::fs::write(&bz, bz2(&xml, 9)).unwrap();
    let gz = dir.path().join("wiki.xml.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(&xml).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let want = read(Format::MediaWiki, &plain).records;
    // Same file name for the bz2 and zstd copies, so the ids match too.
    assert_eq!(read(Format::MediaWiki, &bz).records, want);
    let zdir = tempfile::tempdir().unwrap();
    let zst = zdir.path().join("wiki.xml");
    std::fs::write(&zst, zstd::encode_all(xml.as_slice(), 3).unwrap()).unwrap();
    assert_eq!(read(Format::MediaWiki, &zst).records, want);
    let from_gz = read(Format::MediaWiki, &gz);
    assert_eq!(from_gz.documents().len(), 3);
    assert_eq!(
        from_gz.documents()[0].text,
        read(Format::MediaWiki, &plain).documents()[0].text
    );
}

// ---------------------------------------------------------------------------------------------
// Synthetic dumps for corruption and multistream tests.

const HEADER: &str = r#"<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">
  <siteinfo>
    <sitename>Test</sitename>
    <dbname>testwiki</dbname>
  </siteinfo>
"#;
const FOOTER: &str = "</mediawiki>\n";

/// Words that compress poorly enough to give several bz2 blocks at level 1.
fn filler(seed: usize, words: usize) -> String {
    let mut x = seed as u64 * 2654435761 + 12345;
    let mut s = String::new();
    for i in 0..words {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = 3 + (x >> 60) as usize;
        let w: String = (0..len)
            .map(|k| (b'a' + ((x >> (k * 5 % 56)) % 26) as u8) as char)
            .collect();
        s.push_str(&w);
        s.push(if i % 12 == 11 { '.' } else { ' ' });
    }
    s
}

fn page_xml(i: usize) -> String {
    format!(
        r#"  <page>
    <title>Page {i}</title>
    <ns>0</ns>
    <id>{i}</id>
    <revision>
      <id>{rev}</id>
      <timestamp>2024-01-01T00:00:00Z</timestamp>
      <text xml:space="preserve">'''Page {i}''' is about [[Topic {i}|topic]] number {i} &amp;amp; more.{{{{Infobox thing|name=Page {i}|size={i}}}}}

== Details ==
{{| class="wikitable"
! A !! B
|-
| rowspan="2" | [[X{i}]] || one
|-
| two
|}}
{filler}</text>
    </revision>
  </page>
"#,
        rev = 1000 + i,
        filler = filler(i, 150)
    )
}

fn dump(pages: &[String]) -> String {
    let mut s = HEADER.to_string();
    for p in pages {
        s.push_str(p);
    }
    s.push_str(FOOTER);
    s
}

fn pages(n: usize) -> Vec<String> {
    (0..n).map(page_xml).collect()
}

/// A multistream bz2 file: the header, groups of `per` pages, the footer, each its own stream.
fn multistream(pages: &[String], per: usize) -> Vec<u8> {
    let mut out = bz2(HEADER.as_bytes(), 9);
    for group in pages.chunks(per) {
        out.extend(bz2(group.concat().as_bytes(), 9));
    }
    out.extend(bz2(FOOTER.as_bytes(), 9));
    out
}

fn write(dir: &Path, name: &str, data: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

fn titles(sink: &VecSink) -> Vec<String> {
    sink.documents().iter().map(|d| d.title.clone()).collect()
}

#[test]
fn truncated_bz2_keeps_earlier_pages() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dump(&pages(120));
    // Level 1: 100 kB blocks, so the first half of the file holds complete blocks.
    let full = bz2(xml.as_bytes(), 1);
    let whole = read(Format::MediaWiki, &write(dir.path(), "full.xml.bz2", &full));
    assert_eq!(whole.documents().len(), 120);
    assert!(whole.quarantine().is_empty());

    let cut = write(dir.path(), "cut.xml.bz2", &full[..full.len() / 2]);
    let sink = read(Format::MediaWiki, &cut);
    let kept = sink.documents();
    assert!(!kept.is_empty() && kept.len() < 120, "kept {}", kept.len());
    // Every page read is complete and identical to the full read (same source name aside).
    for (i, d) in kept.iter().enumerate() {
        let w = whole.documents()[i];
        assert_eq!(
            (&d.title, &d.text, &d.sections),
            (&w.title, &w.text, &w.sections)
        );
    }
    let q = sink.quarantine();
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!(q[0].reason, "truncated_input");
    assert_eq!(q[0].dataset, "mediawiki");
    assert_eq!(q[0].source, cut.to_str().unwrap());
    assert!(q[0].byte_offset.is_some());
    assert!(matches!(sink.records.last(), Some(Record::Quarantine(_))));

    // The same cut of plain XML.
    let plain = write(dir.path(), "cut.xml", &xml.as_bytes()[..xml.len() / 2]);
    let sink = read(Format::MediaWiki, &plain);
    let q = sink.quarantine();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].reason, "truncated_input");
    let n = sink.documents().len();
    assert_eq!(q[0].record, Some(n as u64), "the cut page is the next one");
    let page_start = xml
        .find(&format!("  <page>\n    <title>Page {n}<"))
        .unwrap()
        + 2;
    assert_eq!(q[0].byte_offset, Some(page_start as u64));
    assert!(q[0].excerpt.starts_with("<page>"));
}

#[test]
fn shared_sample_cut_in_half() {
    let Some(p) = shared("wikipedia_xml/enwiki-table-markup.xml.bz2") else {
        return;
    };
    let data = std::fs::read(&p).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = write(
        dir.path(),
        "enwiki-table-markup.xml.bz2",
        &data[..data.len() / 2],
    );
    // One 900 kB block: nothing decodes before the cut, and nothing panics.
    let sink = read(Format::MediaWiki, &cut);
    let q = sink.quarantine();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].reason, "truncated_input");
    // Recompressed with small blocks, the first pages survive the same cut.
    let xml = {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut bzip2::read::MultiBzDecoder::new(&data[..]), &mut s)
            .unwrap();
        s
    };
    let small = bz2(&xml, 1);
    let cut = write(dir.path(), "small.xml.bz2", &small[..small.len() / 2]);
    let sink = read(Format::MediaWiki, &cut);
    assert!(!sink.documents().is_empty());
    assert_eq!(sink.quarantine().len(), 1);
    assert_eq!(sink.quarantine()[0].reason, "truncated_input");
    for d in sink.documents() {
        assert_spans(d);
    }
}

#[test]
fn malformed_xml_page_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let mut ps = pages(3);
    ps[1] = ps[1].replace("</title>", "</titel>");
    let xml = dump(&ps);
    let sink = read(
        Format::MediaWiki,
        &write(dir.path(), "bad.xml", xml.as_bytes()),
    );
    assert_eq!(titles(&sink), ["Page 0", "Page 2"]);
    assert_eq!(sink.tables().len(), 2);
    let q = sink.quarantine();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].reason, "malformed_xml");
    assert_eq!(q[0].record, Some(1));
    let at = xml.find("<page>\n    <title>Page 1<").unwrap();
    assert_eq!(q[0].byte_offset, Some(at as u64));
    assert!(q[0].excerpt.contains("</titel>"));
    // Records stay in input order: the quarantine sits between the two pages.
    let kinds: Vec<&str> = sink
        .records
        .iter()
        .map(|r| match r {
            Record::Document(_) => "doc",
            Record::Table(_) => "table",
            _ => "quarantine",
        })
        .collect();
    assert_eq!(kinds, ["doc", "table", "quarantine", "doc", "table"]);

    // A page that never closes before the next one, and garbage that is not XML at all.
    let mut ps = pages(3);
    ps[0] = ps[0].replace("</page>", "");
    let sink = read(
        Format::MediaWiki,
        &write(dir.path(), "open.xml", dump(&ps).as_bytes()),
    );
    assert_eq!(titles(&sink), ["Page 1", "Page 2"]);
    assert_eq!(sink.quarantine()[0].reason, "malformed_xml");
    let sink = read(
        Format::MediaWiki,
        &write(dir.path(), "junk.xml", b"\x00\x01 not xml {"),
    );
    assert!(sink.documents().is_empty());
    assert_eq!(sink.quarantine()[0].reason, "malformed_xml");
}

#[test]
fn invalid_utf8_page_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let ps = pages(3);
    let mut xml = dump(&ps).into_bytes();
    let at = xml.windows(9).position(|w| w == b"number 1 ").unwrap();
    xml[at] = 0xff;
    let sink = read(
        Format::MediaWiki,
        &write(dir.path(), "utf8.xml.bz2", &bz2(&xml, 9)),
    );
    assert_eq!(titles(&sink), ["Page 0", "Page 2"]);
    let q = sink.quarantine();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].reason, "invalid_utf8");
    assert_eq!(q[0].record, Some(1));
    assert_eq!(
        q[0].byte_offset,
        Some((HEADER.len() + ps[0].len() + 2) as u64)
    );
}

#[test]
fn page_missing_title_or_text_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let mut ps = pages(4);
    ps[1] = ps[1].replace("<title>Page 1</title>", "");
    let text_start = ps[2].find("<text").unwrap();
    let text_end = ps[2].find("</text>").unwrap() + "</text>".len();
    ps[2].replace_range(text_start..text_end, "");
    let sink = read(
        Format::MediaWiki,
        &write(dir.path(), "missing.xml", dump(&ps).as_bytes()),
    );
    assert_eq!(titles(&sink), ["Page 0", "Page 3"]);
    let q = sink.quarantine();
    let got: Vec<(&str, Option<u64>)> = q.iter().map(|q| (q.reason.as_str(), q.record)).collect();
    assert_eq!(
        got,
        [("missing_field", Some(1)), ("missing_field", Some(2))]
    );
    assert!(q[0].detail.contains("title"));
    assert!(q[1].detail.contains("text"));
}

#[test]
fn every_cut_of_the_quickstart_is_handled() {
    let xml = std::fs::read(bundled("quickstart/wiki.xml")).unwrap();
    let full = read_with(
        Format::MediaWiki,
        options(|o| o.namespaces = Vec::new()),
        &bundled("quickstart/wiki.xml"),
    );
    let dir = tempfile::tempdir().unwrap();
    for cut in (0..xml.len()).step_by(61) {
        let p = write(dir.path(), "wiki.xml", &xml[..cut]);
        let sink = read_with(
            Format::MediaWiki,
            options(|o| o.namespaces = Vec::new()),
            &p,
        );
        let docs = sink.documents();
        assert!(docs.len() <= 4);
        for (i, d) in docs.iter().enumerate() {
            assert_eq!(*d, full.documents()[i], "cut at {cut}");
        }
        assert_eq!(
            sink.quarantine().len(),
            1,
            "cut at {cut}: {:?}",
            sink.quarantine()
        );
    }
}

fn read_ctx(path: &Path, options: FormatOptions) -> (VecSink, u64) {
    let mut sink = VecSink::default();
    let loc = path.to_str().unwrap().to_string();
    let mut ctx = InputCtx::local(&loc, &options);
    let counter = Arc::new(AtomicU64::new(0));
    ctx.bytes_read = counter.clone();
    read_input(Format::MediaWiki, &ctx, &mut sink).unwrap();
    (sink, counter.load(Ordering::Relaxed))
}

#[test]
fn multistream_parallel_equals_sequential() {
    let dir = tempfile::tempdir().unwrap();
    let mut ps = pages(40);
    // Bad pages inside streams: their quarantine records must get the same offsets.
    ps[7] = ps[7].replace("</title>", "</titel>");
    ps[23] = ps[23].replace("<title>Page 23</title>", "");
    let data = multistream(&ps, 3);
    let p = write(dir.path(), "multi.xml.bz2", &data);
    let (par, par_bytes) = read_ctx(&p, FormatOptions::default_for(Format::MediaWiki));
    let (seq, seq_bytes) = read_ctx(&p, sequential());
    assert_eq!(par.documents().len(), 38);
    assert_eq!(par.tables().len(), 38);
    assert_eq!(par.quarantine().len(), 2);
    assert_eq!(par.records, seq.records);
    assert_eq!(par_bytes, data.len() as u64);
    assert_eq!(seq_bytes, data.len() as u64);
    for d in par.documents() {
        assert_spans(d);
    }

    // One stream per page, and a dump without <siteinfo>.
    let bare: Vec<u8> = {
        let mut out = bz2(b"<mediawiki>\n", 9);
        for pg in &ps[..10] {
            out.extend(bz2(pg.as_bytes(), 9));
        }
        out.extend(bz2(FOOTER.as_bytes(), 9));
        out
    };
    let p = write(dir.path(), "bare.xml.bz2", &bare);
    let (par, _) = read_ctx(&p, FormatOptions::default_for(Format::MediaWiki));
    let (seq, _) = read_ctx(&p, sequential());
    assert_eq!(par.records, seq.records);
    assert_eq!(par.documents().len(), 9);
}

#[test]
fn multistream_corruption_falls_back_to_the_same_output() {
    let dir = tempfile::tempdir().unwrap();
    let ps = pages(30);
    let data = multistream(&ps, 4);
    let par_opts = FormatOptions::default_for(Format::MediaWiki);

    // Cut in half: the streams before the cut are read in parallel, the cut sequentially.
    let p = write(dir.path(), "cut.xml.bz2", &data[..data.len() / 2]);
    let (par, _) = read_ctx(&p, par_opts.clone());
    let (seq, _) = read_ctx(&p, sequential());
    assert_eq!(par.records, seq.records);
    assert!(!par.documents().is_empty());
    assert_eq!(par.quarantine().len(), 1);
    assert_eq!(par.quarantine()[0].reason, "truncated_input");

    // A page split across two streams (cannot happen in real dumps): read sequentially.
    let all = ps.concat();
    let mid = all.len() / 2;
    let mut split = bz2(HEADER.as_bytes(), 9);
    split.extend(bz2(&all.as_bytes()[..mid], 9));
    split.extend(bz2(&all.as_bytes()[mid..], 9));
    split.extend(bz2(FOOTER.as_bytes(), 9));
    let p = write(dir.path(), "split.xml.bz2", &split);
    let (par, _) = read_ctx(&p, par_opts.clone());
    let (seq, _) = read_ctx(&p, sequential());
    assert_eq!(par.documents().len(), 30);
    assert!(par.quarantine().is_empty());
    assert_eq!(par.records, seq.records);

    // Damaged bytes inside a middle stream.
    let mut bad = data.clone();
    let at = data.len() / 2;
    for b in &mut bad[at..at + 64] {
        *b ^= 0x5a;
    }
    let p = write(dir.path(), "bad.xml.bz2", &bad);
    let (par, _) = read_ctx(&p, par_opts);
    let (seq, _) = read_ctx(&p, sequential());
    assert_eq!(par.records, seq.records);
    assert!(!par.documents().is_empty());
    match par.records.last() {
        Some(Record::Quarantine(q)) => {
            assert!(
                ["corrupt_input", "truncated_input"].contains(&q.reason.as_str()),
                "{q:?}"
            )
        }
        other => panic!("{other:?}"),
    }
}
