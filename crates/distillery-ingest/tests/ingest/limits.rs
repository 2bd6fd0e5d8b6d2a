//! Issue 51: memory bounded by the record limits (`max_line_bytes`, `max_page_bytes`,
//! `max_record_bytes`), records over them quarantined as `record_too_large` and read past,
//! and nothing dropped silently (empty inputs, UTF-16, CR line ends). The files are small,
//! hand-written in the real formats; the limits are made small through the options.

use std::io::Write;
use std::path::{Path, PathBuf};

use distillery_core::VecSink;
use distillery_core::spec::{
    Format, FormatOptions, FreebaseOptions, JsonOptions, MediaWikiOptions, WikidataOptions,
};

use crate::common::{read, read_with};

const TRIPLE: &str = "<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/type.object.name>\t\"One\"@en\t.";

fn freebase(limit: u64) -> FormatOptions {
    FormatOptions::Freebase(FreebaseOptions {
        max_line_bytes: limit,
        ..Default::default()
    })
}

fn wikidata(limit: u64) -> FormatOptions {
    FormatOptions::Wikidata(WikidataOptions {
        max_line_bytes: limit,
        ..Default::default()
    })
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

fn reasons(s: &VecSink) -> Vec<&str> {
    s.quarantine().iter().map(|q| q.reason.as_str()).collect()
}

/// Two good lines around one of `big` bytes.
fn lines_around(big: usize, eol: &str) -> (Vec<u8>, u64) {
    let mut data = format!("{TRIPLE}{eol}").into_bytes();
    let offset = data.len() as u64;
    data.extend(std::iter::repeat_n(b'x', big));
    data.extend_from_slice(format!("{eol}{TRIPLE}{eol}").as_bytes());
    (data, offset)
}

#[test]
fn a_freebase_line_over_the_limit_is_quarantined_and_reading_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (data, offset) = lines_around(5000, "\n");
    // Sequential (plain), and decompressed on one thread, parsed on others (gzip).
    for (name, bytes) in [("fb.nt", data.clone()), ("fb.nt.gz", gzip(&data))] {
        let p = write(dir.path(), name, &bytes);
        let s = read_with(Format::Freebase, freebase(1000), &p);
        assert_eq!(s.edges().len(), 2, "{name}");
        let q = s.quarantine();
        assert_eq!(reasons(&s), vec!["record_too_large"], "{name}");
        assert_eq!(q[0].byte_offset, Some(offset), "{name}");
        assert_eq!(q[0].line, Some(2), "{name}");
        assert!(q[0].detail.contains("5000 bytes"), "{}", q[0].detail);
        assert!(q[0].detail.contains("max_line_bytes"), "{}", q[0].detail);
        assert_eq!(q[0].excerpt.len(), 512);
        assert_eq!(s.edges()[1].line, Some(3), "{name}");
    }
}

#[test]
fn a_wikidata_line_over_the_limit_is_quarantined_and_reading_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let entity = |id: &str| {
        format!(
            r#"{{"type":"item","id":"{id}","labels":{{"en":{{"language":"en","value":"{id}"}}}}}}"#
        )
    };
    let big = format!(
        r#"{{"type":"item","id":"Q2","labels":{{}},"x":"{}"}}"#,
        "y".repeat(4000)
    );
    let data = format!("[\n{},\n{big},\n{}\n]\n", entity("Q1"), entity("Q3"));
    for (name, bytes) in [
        ("wd.json", data.clone().into_bytes()),
        ("wd.json.gz", gzip(data.as_bytes())),
    ] {
        let p = write(dir.path(), name, &bytes);
        let s = read_with(Format::Wikidata, wikidata(1000), &p);
        let keys: Vec<&str> = s.entities().iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, vec!["Q1", "Q3"], "{name}");
        assert_eq!(reasons(&s), vec!["record_too_large"], "{name}");
        let q = &s.quarantine()[0];
        assert_eq!(q.line, Some(3));
        assert_eq!(q.record, Some(1));
        assert!(
            q.detail.contains(&format!("{} bytes", big.len() + 1)),
            "{}",
            q.detail
        );
    }
}

/// A multi-member gzip of `mib` MiB of NUL bytes and no newline: each member 1 MiB, so it is
/// made without compressing the whole.
fn nul_bomb(dir: &Path, mib: usize) -> PathBuf {
    let member = gzip(&vec![0u8; 1 << 20]);
    let p = dir.join("bomb.gz");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    for _ in 0..mib {
        f.write_all(&member).unwrap();
    }
    f.flush().unwrap();
    p
}

#[test]
fn a_gzip_of_nul_bytes_without_a_newline_is_one_record_too_large() {
    // 256 MiB of NULs (about 260 KB on disk): read as freebase and as wikidata with a 1 MiB
    // limit, it is read past, never held (it used to be one allocation of the whole).
    let dir = tempfile::tempdir().unwrap();
    let mib = 256;
    let p = nul_bomb(dir.path(), mib);
    for (format, options) in [
        (Format::Freebase, freebase(1 << 20)),
        (Format::Wikidata, wikidata(1 << 20)),
    ] {
        let s = read_with(format, options, &p);
        assert_eq!(reasons(&s), vec!["record_too_large"], "{format}");
        let q = &s.quarantine()[0];
        assert_eq!(q.byte_offset, Some(0));
        assert!(
            q.detail.contains(&format!("{} bytes", mib << 20)),
            "{format}: {}",
            q.detail
        );
    }
}

#[test]
fn a_json_record_over_the_limit_is_quarantined_and_the_next_ones_read() {
    let dir = tempfile::tempdir().unwrap();
    let record = |id: usize, filler: usize| {
        format!(
            r#"{{"_id":"q{id}","question":"Q{id}?","answer":"a","supporting_facts":[],"context":[["T{id}",["S {id}. {}"]]]}}"#,
            "z".repeat(filler)
        )
    };
    let mut items: Vec<String> = (0..3).map(|i| record(i, 10)).collect();
    items.push(record(3, 20_000));
    items.extend((4..7).map(|i| record(i, 10)));
    let data = format!("[{}]", items.join(", "));
    let offset = data.find(r#"{"_id":"q3""#).unwrap() as u64;
    let options = FormatOptions::Json(JsonOptions {
        max_record_bytes: 4096,
    });
    let p = write(dir.path(), "hotpot_dev.json.gz", &gzip(data.as_bytes()));
    let s = read_with(Format::HotpotQa, options, &p);
    let ids: Vec<&str> = s
        .questions()
        .iter()
        .map(|q| q.question_id.as_str())
        .collect();
    assert_eq!(ids, vec!["q0", "q1", "q2", "q4", "q5", "q6"]);
    assert_eq!(reasons(&s), vec!["record_too_large"]);
    let q = &s.quarantine()[0];
    assert_eq!(q.byte_offset, Some(offset));
    assert_eq!(q.record, Some(3));
    assert!(
        q.detail.contains(&format!("{} bytes", items[3].len())),
        "{}",
        q.detail
    );
    assert!(q.detail.contains("max_record_bytes"), "{}", q.detail);
    assert!(!q.detail.contains("cannot be split"), "{}", q.detail);
}

#[test]
fn a_page_over_the_limit_is_quarantined_with_its_length_and_reading_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let page = |t: &str, text: &str| {
        format!(
            "<page><title>{t}</title><ns>0</ns><id>1</id><revision><id>2</id><text>{text}</text></revision></page>\n"
        )
    };
    let big = page("Big", &"Word. ".repeat(20_000));
    let xml = format!(
        "<mediawiki>\n{}{big}{}</mediawiki>\n",
        page("A", "Alpha."),
        page("B", "Beta.")
    );
    let offset = xml.find("<page><title>Big").unwrap() as u64;
    let options = FormatOptions::MediaWiki(MediaWikiOptions {
        max_page_bytes: 10_000,
        ..Default::default()
    });
    for (name, bytes) in [
        ("wiki.xml", xml.clone().into_bytes()),
        ("wiki.xml.gz", gzip(xml.as_bytes())),
    ] {
        let p = write(dir.path(), name, &bytes);
        let s = read_with(Format::MediaWiki, options.clone(), &p);
        let titles: Vec<&str> = s.documents().iter().map(|d| d.title.as_str()).collect();
        assert_eq!(titles, vec!["A", "B"], "{name}");
        assert_eq!(reasons(&s), vec!["record_too_large"], "{name}");
        let q = &s.quarantine()[0];
        assert_eq!(q.byte_offset, Some(offset));
        let len = big.trim_end().len();
        assert!(
            q.detail.contains(&format!("page of {len} bytes")),
            "{}",
            q.detail
        );
        assert!(q.detail.contains("max_page_bytes"), "{}", q.detail);
    }
}

#[test]
fn cr_only_and_mixed_line_ends_are_n_triples_lines() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3000;
    for eol in ["\r", "\r\n", "\n"] {
        let data = format!("{TRIPLE}{eol}").repeat(n);
        let mixed = format!("{TRIPLE}\r{TRIPLE}\r\n{TRIPLE}\n{TRIPLE}");
        for (name, bytes) in [
            ("cr.nt", data.clone().into_bytes()),
            // Parsed in chunks by the parallel line cutter.
            ("cr.nt.gz", gzip(data.as_bytes())),
            ("mixed.nt", mixed.clone().into_bytes()),
            ("mixed.nt.gz", gzip(mixed.as_bytes())),
        ] {
            let p = write(dir.path(), name, &bytes);
            let s = read(Format::Freebase, &p);
            assert!(
                s.quarantine().is_empty(),
                "{eol:?} {name}: {:?}",
                s.quarantine()
            );
            let want = if name.starts_with("cr") { n } else { 4 };
            let edges = s.edges();
            assert_eq!(edges.len(), want, "{eol:?} {name}");
            let lines: Vec<u64> = edges.iter().map(|t| t.line.unwrap()).collect();
            assert_eq!(
                lines,
                (1..=want as u64).collect::<Vec<_>>(),
                "{eol:?} {name}"
            );
        }
    }
}

#[test]
fn a_cr_only_file_longer_than_a_chunk_keeps_its_line_numbers() {
    // More than the 1 MiB chunks of the parallel cutter, CR line ends only.
    let dir = tempfile::tempdir().unwrap();
    let n = 12_000;
    let data = format!("{TRIPLE}\r").repeat(n);
    assert!(data.len() > 1 << 20);
    let p = write(dir.path(), "big_cr.nt.gz", &gzip(data.as_bytes()));
    let s = read(Format::Freebase, &p);
    assert!(s.quarantine().is_empty());
    let lines: Vec<u64> = s.edges().iter().map(|t| t.line.unwrap()).collect();
    assert_eq!(lines, (1..=n as u64).collect::<Vec<_>>());
}

#[test]
fn empty_inputs_are_one_quarantine_record_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(Format, &str, &[u8]); 8] = [
        (Format::Freebase, "empty.nt", b""),
        (Format::Freebase, "empty.nt.gz", &gzip(b"")),
        (Format::Wikidata, "empty.json", b""),
        (Format::MediaWiki, "empty.xml", b""),
        (Format::HotpotQa, "empty.json", b"  \n"),
        (Format::Musique, "empty.jsonl", b""),
        (Format::MetaQaKb, "kb.txt", b""),
        (Format::Fb15k, "test.tsv", b"\xEF\xBB\xBF\n"),
    ];
    for (format, name, bytes) in cases {
        let p = write(dir.path(), name, bytes);
        let s = read(format, &p);
        assert_eq!(s.records.len(), 1, "{format} {name}");
        assert_eq!(reasons(&s), vec!["empty_input"], "{format} {name}");
        assert_eq!(s.quarantine()[0].dataset, format.name());
    }
}

#[test]
fn utf16_inputs_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{TRIPLE}\n");
    let le: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let be: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
    let cases = [
        ([&[0xFF, 0xFE][..], &le].concat(), "UTF-16 (little-endian)"),
        ([&[0xFE, 0xFF][..], &be].concat(), "UTF-16 (big-endian)"),
        (le.clone(), "UTF-16 (little-endian)"),
        (
            gzip(&[&[0xFF, 0xFE][..], &le].concat()),
            "UTF-16 (little-endian)",
        ),
    ];
    for (i, (bytes, name)) in cases.into_iter().enumerate() {
        for format in [Format::Freebase, Format::HotpotQa, Format::MediaWiki] {
            let p = write(dir.path(), &format!("in{i}"), &bytes);
            let s = read(format, &p);
            assert_eq!(s.records.len(), 1, "{format} case {i}");
            let q = &s.quarantine()[0];
            assert_eq!(q.reason, "unsupported_encoding");
            assert_eq!(q.detail, format!("{name} text: convert the file to UTF-8"));
        }
    }
}

#[test]
fn a_utf8_byte_order_mark_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let data = format!("\u{feff}{TRIPLE}\n{TRIPLE}\n");
    for (name, bytes) in [
        ("bom.nt", data.clone().into_bytes()),
        ("bom.nt.gz", gzip(data.as_bytes())),
    ] {
        let p = write(dir.path(), name, &bytes);
        let s = read(Format::Freebase, &p);
        assert!(s.quarantine().is_empty(), "{name}: {:?}", s.quarantine());
        assert_eq!(s.edges().len(), 2, "{name}");
    }
}
