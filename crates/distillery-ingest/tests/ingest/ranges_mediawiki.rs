//! Byte-range reads of multistream bz2 MediaWiki dumps, built here from a few pages: each
//! stream compressed on its own and concatenated, with a matching `-index.txt`.
//!
//! Read as ranges, however cut (equal cuts inside streams, inside the first stream, on a stream
//! start, a byte either side of one, the planner's cuts from the index or from scanning), a dump
//! gives exactly the records of one range over the whole file; those are the pages and tables
//! of a read without a range, in the same order, and the same quarantine records placed by
//! stream instead of by decompressed offset.

use std::io::Write;
use std::path::Path;

use distillery_core::Record;
use distillery_core::spec::{Format, FormatOptions, MediaWikiOptions};
use distillery_ingest::{ByteRange, InputCtx, LocalFs, find_multistream_index, split_ranges};

use crate::common::shared;
use crate::ranges::{assert_planned, cut_at, equal, read_part, read_ranges, write};

pub const HEADER: &str = r#"<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">
  <siteinfo>
    <sitename>Test</sitename>
    <dbname>testwiki</dbname>
  </siteinfo>
"#;
pub const FOOTER: &str = "</mediawiki>\n";
const NAME: &str = "testwiki-20240101-pages-articles-multistream.xml.bz2";
const INDEX: &str = "testwiki-20240101-pages-articles-multistream-index.txt";

pub fn bz2(data: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(1));
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Words that do not compress to nothing.
fn filler(seed: usize, words: usize) -> String {
    let mut x = seed as u64 * 2654435761 + 12345;
    let mut s = String::new();
    for i in 0..words {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = 3 + (x >> 60) as usize;
        s.extend((0..len).map(|k| (b'a' + ((x >> (k * 5 % 56)) % 26) as u8) as char));
        s.push(if i % 12 == 11 { '.' } else { ' ' });
    }
    s
}

fn page(i: usize) -> String {
    format!(
        r#"  <page>
    <title>Page {i}</title>
    <ns>0</ns>
    <id>{i}</id>
    <revision>
      <id>{rev}</id>
      <timestamp>2024-01-01T00:00:00Z</timestamp>
      <text xml:space="preserve">'''Page {i}''' links [[Topic {i}|topic]].

== Table ==
{{| class="wikitable"
! A !! B
|-
| [[X{i}]] || {i}
|}}
{filler}</text>
    </revision>
  </page>
"#,
        rev = 1000 + i,
        filler = filler(i, 120)
    )
}

/// Pages 0..n, two of them bad (malformed XML, no title).
pub fn pages(n: usize) -> Vec<String> {
    let mut ps: Vec<String> = (0..n).map(page).collect();
    if n > 23 {
        ps[7] = ps[7].replace("</title>", "</titel>");
        ps[23] = ps[23].replace("<title>Page 23</title>", "");
    }
    ps
}

/// A multistream dump and where its streams start.
struct Dump {
    bytes: Vec<u8>,
    starts: Vec<u64>,
    /// `offset:page_id:title` per page, as Wikipedia's index has them.
    index: String,
}

/// The header (with the first `in_header` pages), groups of `per` pages, the footer: each its
/// own bz2 stream.
fn dump(pages: &[String], per: usize, in_header: usize) -> Dump {
    let mut d = Dump {
        bytes: Vec::new(),
        starts: Vec::new(),
        index: String::new(),
    };
    let stream = |d: &mut Dump, xml: String, first: usize, count: usize| {
        let offset = d.bytes.len() as u64;
        d.starts.push(offset);
        for i in first..first + count {
            d.index.push_str(&format!("{offset}:{i}:Page {i}\n"));
        }
        d.bytes.extend(bz2(xml.as_bytes()));
    };
    let header = format!("{HEADER}{}", pages[..in_header].concat());
    stream(&mut d, header, 0, in_header);
    let mut first = in_header;
    for group in pages[in_header..].chunks(per) {
        stream(&mut d, group.concat(), first, group.len());
        first += group.len();
    }
    stream(&mut d, FOOTER.to_string(), 0, 0);
    d
}

pub fn mediawiki(parallel: bool) -> FormatOptions {
    FormatOptions::MediaWiki(MediaWikiOptions {
        parallel_streams: parallel,
        ..MediaWikiOptions::default()
    })
}

pub fn content(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| !matches!(r, Record::Quarantine(_)))
        .cloned()
        .collect()
}

pub fn reasons(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Quarantine(q) => Some(q.reason.clone()),
            _ => None,
        })
        .collect()
}

/// The planner's ranges for targets of a third and a seventh of the dump, with and without its
/// index; every cut is a stream start.
fn planned(path: &Path, starts: &[u64], index: Option<&str>) -> Vec<Vec<ByteRange>> {
    let options = mediawiki(true);
    let loc = path.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    let size = std::fs::metadata(path).unwrap().len();
    let mut sets = Vec::new();
    for target in [size.div_ceil(3), size.div_ceil(7)] {
        for index in [index, None] {
            let ranges = split_ranges(Format::MediaWiki, &ctx, target, index).unwrap();
            assert_planned(&ranges, size, target);
            assert!(ranges.len() > 1, "{ranges:?}");
            for r in &ranges[1..] {
                assert!(starts.contains(&r.start), "{r:?} not on a stream start");
            }
            sets.push(ranges);
        }
    }
    sets
}

/// Reads the dump whole and in every cut; returns the one-range read.
fn assert_dump_reads_the_same_in_ranges(path: &Path, d: &Dump, index: Option<&str>) -> Vec<Record> {
    let size = d.bytes.len() as u64;
    let options = mediawiki(true);
    let whole = read_part(Format::MediaWiki, &options, path, None).unwrap();
    let one = read_part(
        Format::MediaWiki,
        &options,
        path,
        Some(ByteRange::new(0, size)),
    )
    .unwrap();
    assert_eq!(content(&one), content(&whole));
    assert_eq!(reasons(&one), reasons(&whole));
    for r in &one {
        if let Record::Quarantine(q) = r {
            assert_eq!(
                (q.byte_offset, q.record, q.line),
                (None, None, None),
                "{q:?}"
            );
            assert!(q.detail.contains("bz2 stream at compressed byte"), "{q:?}");
        }
    }
    let s = &d.starts;
    let mid = s.len() / 2;
    let mut sets: Vec<Vec<ByteRange>> = [2, 3, 7].iter().map(|&n| equal(size, n)).collect();
    for cuts in [
        vec![5],
        vec![s[1]],
        vec![s[1] - 1, s[1] + 1],
        vec![s[1], s[2], s[mid] + 20, s[mid + 1] - 1],
        vec![s[s.len() - 1] + 1],
        vec![s[3], s[3], size - 1],
    ] {
        sets.push(cut_at(size, &cuts));
    }
    sets.extend(planned(path, s, index));
    for ranges in &sets {
        let got = read_ranges(Format::MediaWiki, &options, path, ranges);
        assert!(got == one, "cut as {ranges:?}");
        let seq = read_ranges(Format::MediaWiki, &mediawiki(false), path, ranges);
        assert!(seq == one, "sequential, cut as {ranges:?}");
    }
    one
}

#[test]
fn multistream_dump_reads_the_same_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let d = dump(&pages(60), 4, 0);
    let p = write(dir.path(), NAME, &d.bytes);
    write(dir.path(), INDEX, d.index.as_bytes());
    let index = find_multistream_index(&LocalFs, p.to_str().unwrap()).unwrap();
    assert!(index.ends_with(INDEX));
    let one = assert_dump_reads_the_same_in_ranges(&p, &d, Some(&index));
    assert_eq!(
        one.iter()
            .filter(|r| matches!(r, Record::Document(_)))
            .count(),
        58
    );
    assert_eq!(reasons(&one), vec!["malformed_xml", "missing_field"]);

    // The index compressed, as Wikipedia ships it, gives the same cuts.
    let bz = write(
        dir.path(),
        &format!("{INDEX}.bz2"),
        &bz2(d.index.as_bytes()),
    );
    let options = mediawiki(true);
    let loc = p.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    let target = d.bytes.len() as u64 / 5;
    assert_eq!(
        split_ranges(Format::MediaWiki, &ctx, target, bz.to_str()).unwrap(),
        split_ranges(Format::MediaWiki, &ctx, target, Some(&index)).unwrap()
    );
    // An index of another dump: its offsets are checked, the cuts found by scanning.
    let wrong = write(dir.path(), "wrong-index.txt", b"3:1:A\n777:2:B\n1500:3:C\n");
    assert_eq!(
        split_ranges(Format::MediaWiki, &ctx, target, wrong.to_str()).unwrap(),
        split_ranges(Format::MediaWiki, &ctx, target, None).unwrap()
    );
}

#[test]
fn pages_in_the_first_stream_belong_to_the_range_holding_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dump(&pages(30), 3, 5);
    let p = write(dir.path(), NAME, &d.bytes);
    write(dir.path(), INDEX, d.index.as_bytes());
    let one = assert_dump_reads_the_same_in_ranges(&p, &d, None);
    assert_eq!(
        one.iter()
            .filter(|r| matches!(r, Record::Document(_)))
            .count(),
        28
    );
}

#[test]
fn a_cut_dump_reads_the_same_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let d = dump(&pages(40), 4, 0);
    let cut = d.bytes.len() * 7 / 10;
    let p = write(dir.path(), "cut-multistream.xml.bz2", &d.bytes[..cut]);
    let size = cut as u64;
    let options = mediawiki(true);
    let whole = read_part(Format::MediaWiki, &options, &p, None).unwrap();
    assert_eq!(
        reasons(&whole).last().map(String::as_str),
        Some("truncated_input")
    );
    for ranges in [
        equal(size, 1),
        equal(size, 2),
        equal(size, 3),
        equal(size, 7),
    ] {
        let got = read_ranges(Format::MediaWiki, &options, &p, &ranges);
        assert_eq!(content(&got), content(&whole), "{ranges:?}");
        assert_eq!(reasons(&got), reasons(&whole), "{ranges:?}");
    }
}

#[test]
fn single_stream_dumps_are_one_stream_range() {
    let dir = tempfile::tempdir().unwrap();
    let xml = format!("{HEADER}{}{FOOTER}", pages(12).concat());
    let p = write(dir.path(), "single.xml.bz2", &bz2(xml.as_bytes()));
    let size = std::fs::metadata(&p).unwrap().len();
    let options = mediawiki(true);
    let loc = p.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    // The planner cuts it into block ranges (see ranges_blocks.rs).
    let planned = split_ranges(Format::MediaWiki, &ctx, size / 4, None).unwrap();
    assert!(planned.len() >= 4, "{planned:?}");
    assert!(planned.iter().all(|r| r.blocks), "{planned:?}");
    // As stream ranges, its one stream belongs to the range holding offset 0; the others
    // read nothing.
    let whole = read_part(Format::MediaWiki, &options, &p, None).unwrap();
    let got = read_ranges(Format::MediaWiki, &options, &p, &equal(size, 3));
    assert_eq!(content(&got), content(&whole));
    assert_eq!(reasons(&got), reasons(&whole));

    // A plain XML dump cannot be split.
    let plain = write(dir.path(), "plain.xml", xml.as_bytes());
    let n = xml.len() as u64;
    assert!(
        read_part(
            Format::MediaWiki,
            &options,
            &plain,
            Some(ByteRange::new(0, n / 2))
        )
        .is_err()
    );
    if let Some(sample) = shared("wikipedia_xml/enwiki-table-markup.xml.bz2") {
        let size = std::fs::metadata(&sample).unwrap().len();
        let whole = read_part(Format::MediaWiki, &options, &sample, None).unwrap();
        let got = read_ranges(Format::MediaWiki, &options, &sample, &equal(size, 2));
        assert_eq!(content(&got), content(&whole));
    }
}
