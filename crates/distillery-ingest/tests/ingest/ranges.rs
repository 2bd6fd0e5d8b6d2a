//! Byte-range reads of line inputs (Freebase N-Triples, Wikidata JSON dumps, JSON-lines QA
//! files), the planner's cuts, and the threaded read of compressed line files.
//!
//! A file read as ranges, however cut (naive equal cuts, cuts inside a line, on a newline,
//! just after one, empty ranges, the planner's), gives exactly the records of one range over
//! the whole file, and those are the records of a read without a range but for line numbers
//! (a range records byte offsets only). QA context documents shared across ranges are written
//! by each range: dropping repeated ids gives the whole read.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use distillery_core::spec::{Format, FormatOptions, FreebaseOptions};
use distillery_core::{QuarantineRecord, Record, RecordSink, VecSink};
use distillery_ingest::{ByteRange, InputCtx, read_input, split_ranges};

use crate::common::shared;

pub fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

/// Reads `path` under `range` (`None`: without one).
pub fn read_part(
    format: Format,
    options: &FormatOptions,
    path: &Path,
    range: Option<ByteRange>,
) -> Result<Vec<Record>, distillery_ingest::IngestError> {
    let loc = path.to_str().unwrap().to_string();
    let mut ctx = InputCtx::local(&loc, options);
    ctx.range = range;
    let mut sink = VecSink::default();
    read_input(format, &ctx, &mut sink)?;
    Ok(sink.records)
}

/// The records of every range, concatenated in range order.
pub fn read_ranges(
    format: Format,
    options: &FormatOptions,
    path: &Path,
    ranges: &[ByteRange],
) -> Vec<Record> {
    let mut all = Vec::new();
    for r in ranges {
        let part = read_part(format, options, path, Some(*r))
            .unwrap_or_else(|e| panic!("{} {r:?}: {e}", path.display()));
        all.extend(part);
    }
    all
}

/// The ranges between sorted cut points (equal cuts give empty ranges).
pub fn cut_at(size: u64, cuts: &[u64]) -> Vec<ByteRange> {
    let mut bounds = vec![0];
    bounds.extend(cuts.iter().copied().filter(|&c| c <= size));
    bounds.push(size);
    bounds.sort_unstable();
    bounds
        .windows(2)
        .map(|w| ByteRange::new(w[0], w[1]))
        .collect()
}

/// `n` ranges of equal size.
pub fn equal(size: u64, n: u64) -> Vec<ByteRange> {
    let cuts: Vec<u64> = (1..n).map(|k| k * size / n).collect();
    cut_at(size, &cuts)
}

/// Awkward cut sets of a line file: inside a line, on a newline, just after one, near both
/// ends, and an empty range.
fn awkward_cuts(data: &[u8]) -> Vec<Vec<u64>> {
    let newlines: Vec<u64> = data
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i as u64)
        .collect();
    let nl = |k: usize| newlines[(newlines.len() * k / 10).min(newlines.len() - 1)];
    let size = data.len() as u64;
    vec![
        vec![nl(3) - 5, nl(6) - 1],
        vec![nl(2), nl(5), nl(8)],
        vec![nl(2) + 1, nl(4) + 1, nl(7) + 1],
        vec![1, size - 1],
        vec![nl(1), nl(1), nl(9) + 1],
        vec![newlines[0], newlines[1], newlines[1] + 1, newlines[2] + 3],
    ]
}

/// Every cut of interest for a line file: N = 2, 3, 7 equal ranges, the awkward cut sets, and
/// the planner's ranges for targets of a third and a seventh of the file.
fn all_cuts(format: Format, options: &FormatOptions, path: &Path) -> Vec<Vec<ByteRange>> {
    let data = std::fs::read(path).unwrap();
    let size = data.len() as u64;
    let mut sets: Vec<Vec<ByteRange>> = [2, 3, 7].iter().map(|&n| equal(size, n)).collect();
    sets.extend(awkward_cuts(&data).iter().map(|c| cut_at(size, c)));
    let loc = path.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, options);
    for target in [size.div_ceil(3), size.div_ceil(7)] {
        let planned = split_ranges(format, &ctx, target, None).unwrap();
        assert_planned(&planned, size, target);
        sets.push(planned);
    }
    sets
}

/// Planned ranges cover `[0, size)` in order without gaps, about `target` bytes each.
pub fn assert_planned(ranges: &[ByteRange], size: u64, target: u64) {
    assert_eq!(ranges.first().unwrap().start, 0);
    assert_eq!(ranges.last().unwrap().end, size);
    for w in ranges.windows(2) {
        assert_eq!(w[0].end, w[1].start, "{ranges:?}");
    }
    assert!(ranges.iter().all(|r| r.start < r.end), "{ranges:?}");
    assert!(ranges.len() as u64 <= size.div_ceil(target), "{ranges:?}");
}

/// Records without what a range cannot know: quarantine records dropped, triples' lines
/// cleared.
fn content(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| !matches!(r, Record::Quarantine(_)))
        .cloned()
        .map(|r| match r {
            Record::Triple(mut t) => {
                t.line = None;
                Record::Triple(t)
            }
            Record::Literal(mut t) => {
                t.line = None;
                Record::Literal(t)
            }
            r => r,
        })
        .collect()
}

fn quarantine(records: &[Record]) -> Vec<&QuarantineRecord> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Quarantine(q) => Some(q),
            _ => None,
        })
        .collect()
}

/// The first record of each id, in order.
fn first_of_each_id(records: Vec<Record>) -> Vec<Record> {
    let mut seen = HashSet::new();
    records
        .into_iter()
        .filter(|r| seen.insert(r.id().to_string()))
        .collect()
}

/// Reads `path` whole and in every cut: the ranged reads equal each other exactly, and the
/// whole read but for positions (`dedupe`: after dropping repeated ids). Returns the whole read.
fn assert_ranges_read_the_same(
    format: Format,
    options: &FormatOptions,
    path: &Path,
    dedupe: bool,
) -> Vec<Record> {
    let whole = read_part(format, options, path, None).unwrap();
    let size = std::fs::metadata(path).unwrap().len();
    let one = read_part(format, options, path, Some(ByteRange::new(0, size))).unwrap();
    assert_eq!(content(&one), content(&whole), "{}", path.display());
    let (qw, qo) = (quarantine(&whole), quarantine(&one));
    assert_eq!(qw.len(), qo.len());
    for (w, o) in qw.iter().zip(&qo) {
        assert_eq!(
            (&w.reason, w.byte_offset, &w.excerpt),
            (&o.reason, o.byte_offset, &o.excerpt)
        );
        assert_eq!((o.line, o.record), (None, None), "{o:?}");
    }
    for ranges in all_cuts(format, options, path) {
        let mut got = read_ranges(format, options, path, &ranges);
        if dedupe {
            got = first_of_each_id(got);
        }
        assert!(got == one, "{} cut as {ranges:?}", path.display());
    }
    whole
}

#[test]
fn freebase_sample_reads_the_same_in_ranges() {
    let Some(p) = shared("freebase/freebase-rdf-latest.head10k.nt") else {
        return;
    };
    // The head is schema triples, which the English filter drops whole: read without it.
    for names in [true, false] {
        let options = FormatOptions::Freebase(FreebaseOptions {
            english_only: false,
            names,
            ..Default::default()
        });
        let whole = assert_ranges_read_the_same(Format::Freebase, &options, &p, false);
        assert!(content(&whole).len() >= 9000, "{}", content(&whole).len());
    }
}

/// N-Triples with bad lines (syntax, invalid UTF-8), CRLF and blank lines, and no final newline.
fn ntriples_with_bad_lines() -> Vec<u8> {
    let mut data = Vec::new();
    for i in 0..400 {
        let line = match i % 50 {
            7 => {
                "<http://rdf.freebase.com/ns/m.0bad> <http://rdf.freebase.com/ns/p> .\n".to_string()
            }
            13 => "\n".to_string(),
            21 => "# a comment\r\n".to_string(),
            _ => format!(
                "<http://rdf.freebase.com/ns/m.0{i}>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Name {i}\"@en\t.\r\n"
            ),
        };
        data.extend_from_slice(line.as_bytes());
        if i == 123 {
            data.extend_from_slice(
                b"<http://rdf.freebase.com/ns/m.0x> <http://rdf.freebase.com/ns/p> \"\xff\" .\n",
            );
        }
    }
    data.extend_from_slice(b"<http://rdf.freebase.com/ns/m.0end> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.0a> .");
    data
}

#[test]
fn ntriples_with_bad_lines_read_the_same_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bad.nt", &ntriples_with_bad_lines());
    let options = FormatOptions::default_for(Format::Freebase);
    let whole = assert_ranges_read_the_same(Format::Freebase, &options, &p, false);
    let q = quarantine(&whole);
    assert_eq!(q.len(), 9, "{q:#?}");
    assert!(q.iter().any(|q| q.reason == "invalid_utf8"));
    let t: Vec<_> = whole
        .iter()
        .filter_map(|r| match r {
            Record::Triple(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(t.last().unwrap().subject, "m.0end");
}

/// A Wikidata JSON dump of a few entities in the real layout: `[`, one entity a line with a
/// trailing comma, `]`; with one broken line and one statement with an unreadable value.
fn wikidata_dump() -> String {
    let entity = |q: u32, label: &str, target: u32| {
        format!(
            r#"{{"type":"item","id":"Q{q}","labels":{{"en":{{"language":"en","value":"{label}"}},"fr":{{"language":"fr","value":"{label} (fr)"}}}},"descriptions":{{"en":{{"language":"en","value":"entity {q}"}}}},"aliases":{{"en":[{{"language":"en","value":"{label} alias"}}]}},"claims":{{"P31":[{{"mainsnak":{{"snaktype":"value","property":"P31","datavalue":{{"value":{{"entity-type":"item","numeric-id":{target},"id":"Q{target}"}},"type":"wikibase-entityid"}},"datatype":"wikibase-item"}},"type":"statement","id":"Q{q}$1","rank":"normal"}}],"P1082":[{{"mainsnak":{{"snaktype":"value","property":"P1082","datavalue":{{"value":{{"amount":"+{q}000","unit":"1"}},"type":"quantity"}},"datatype":"quantity"}},"type":"statement","qualifiers":{{"P585":[{{"snaktype":"value","property":"P585","datavalue":{{"value":{{"time":"+2020-01-01T00:00:00Z","timezone":0,"before":0,"after":0,"precision":11,"calendarmodel":"http://www.wikidata.org/entity/Q1985727"}},"type":"time"}},"datatype":"time"}}]}},"id":"Q{q}$2","rank":"normal"}}]}},"sitelinks":{{"enwiki":{{"site":"enwiki","title":"{label}","badges":[]}}}}}}"#
        )
    };
    let mut s = String::from("[\n");
    for q in 1..=40u32 {
        let line = match q {
            11 => r#"{"type":"item","id":"Q11","labels":{"en":{"language":"en","value":"Broken""#.to_string(),
            27 => r#"{"type":"item","id":"Q27","claims":{"P18":[{"mainsnak":{"snaktype":"value","property":"P18","datavalue":{"type":"quantity"}},"type":"statement"}]}}"#.to_string(),
            _ => entity(q, &format!("Entity {q}"), q * 7 % 40 + 1),
        };
        s.push_str(&line);
        s.push_str(if q < 40 { ",\n" } else { "\n" });
    }
    s.push_str("]\n");
    s
}

#[test]
fn wikidata_dumps_read_the_same_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "wikidata-dump.json", wikidata_dump().as_bytes());
    let options = FormatOptions::default_for(Format::Wikidata);
    let whole = assert_ranges_read_the_same(Format::Wikidata, &options, &p, false);
    let reasons: Vec<_> = quarantine(&whole)
        .iter()
        .map(|q| q.reason.clone())
        .collect();
    assert_eq!(reasons, vec!["bad_json", "bad_value"]);
    assert_eq!(
        content(&whole)
            .iter()
            .filter(|r| matches!(r, Record::Triple(_) | Record::Literal(_)))
            .count(),
        38 * 2
    );
    let Some(sample) = shared("wikidata/entities.first35.json") else {
        return;
    };
    let whole = assert_ranges_read_the_same(Format::Wikidata, &options, &sample, false);
    assert!(content(&whole).len() > 35);
}

#[test]
fn json_lines_qa_samples_read_the_same_in_ranges() {
    for (format, rel) in [
        (
            Format::HotpotQa,
            "hotpotqa/hotpot_dev_fullwiki_v1.amor200.jsonl",
        ),
        (
            Format::Musique,
            "musique/musique_ans_v1.0_train.first70.jsonl",
        ),
    ] {
        let Some(p) = shared(rel) else {
            continue;
        };
        let options = FormatOptions::default_for(format);
        let whole = assert_ranges_read_the_same(format, &options, &p, true);
        let questions = whole
            .iter()
            .filter(|r| matches!(r, Record::Question(_)))
            .count();
        assert!(questions >= 70, "{rel}: {questions}");
    }
}

#[test]
fn json_lines_with_a_bad_line_read_the_same_in_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = String::new();
    for i in 0..60 {
        if i == 17 {
            s.push_str("{\"id\":\"2hop__17\",\"paragraphs\":[\n");
            continue;
        }
        s.push_str(&format!(
            r#"{{"id":"2hop__{i}","paragraphs":[{{"idx":0,"title":"T{t}","paragraph_text":"Text {t}. More.","is_supporting":true}},{{"idx":1,"title":"U{i}","paragraph_text":"Other {i}.","is_supporting":false}}],"question":"Q{i}?","question_decomposition":[],"answer":"a{i}","answer_aliases":[],"answerable":true}}"#,
            t = i % 7
        ));
        s.push('\n');
    }
    let p = write(dir.path(), "musique_dev.jsonl", s.as_bytes());
    let options = FormatOptions::default_for(Format::Musique);
    let whole = assert_ranges_read_the_same(Format::Musique, &options, &p, true);
    assert_eq!(quarantine(&whole).len(), 1);
}

fn gzip(content: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(content).unwrap();
    enc.finish().unwrap()
}

fn bzip2(content: &[u8]) -> Vec<u8> {
    let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    enc.write_all(content).unwrap();
    enc.finish().unwrap()
}

/// Several megabytes of N-Triples (the shared sample repeated, else the synthetic lines), so the
/// threaded read cuts several chunks.
fn big_ntriples() -> Vec<u8> {
    let one = match shared("freebase/freebase-rdf-latest.head10k.nt") {
        Some(p) => std::fs::read(p).unwrap(),
        None => ntriples_with_bad_lines().repeat(30),
    };
    let mut data = one.repeat(3);
    data.extend_from_slice(&ntriples_with_bad_lines());
    data
}

#[test]
fn compressed_line_files_read_on_threads_give_the_plain_records() {
    let dir = tempfile::tempdir().unwrap();
    let options = FormatOptions::Freebase(FreebaseOptions {
        english_only: false,
        names: true,
        ..Default::default()
    });
    let data = big_ntriples();
    let plain = write(dir.path(), "fb.nt", &data);
    let want = read_part(Format::Freebase, &options, &plain, None).unwrap();
    assert!(!quarantine(&want).is_empty());
    // Ids name the file: the compressed copies get the same name in other folders.
    for (sub, bytes) in [("gz", gzip(&data)), ("bz2", bzip2(&data))] {
        let p = in_folder(dir.path(), sub, "fb.nt", &bytes);
        let got = read_part(Format::Freebase, &options, &p, None).unwrap();
        assert!(strip_source(got) == strip_source(want.clone()), "{sub}");
    }

    let dump = wikidata_dump().replace("]\n", "");
    let mut big = dump.clone();
    for _ in 0..60 {
        big.push_str(&dump[2..]);
    }
    big.push_str("]\n");
    let plain = write(dir.path(), "wd.json", big.as_bytes());
    let options = FormatOptions::default_for(Format::Wikidata);
    let want = read_part(Format::Wikidata, &options, &plain, None).unwrap();
    let p = in_folder(dir.path(), "gz", "wd.json", &gzip(big.as_bytes()));
    let got = read_part(Format::Wikidata, &options, &p, None).unwrap();
    let q = quarantine(&want);
    assert_eq!(q.len(), 2 * 61);
    assert_eq!(
        q.last().unwrap().record,
        Some(61 * 40 - 14),
        "{:?}",
        q.last()
    );
    assert!(strip_source(got) == strip_source(want));
}

/// Writes `dir/sub/name`.
fn in_folder(dir: &Path, sub: &str, name: &str, content: &[u8]) -> PathBuf {
    let d = dir.join(sub);
    std::fs::create_dir_all(&d).unwrap();
    write(&d, name, content)
}

/// Records with quarantine records' `source` (the file's location) and ids blanked.
fn strip_source(records: Vec<Record>) -> Vec<Record> {
    records
        .into_iter()
        .map(|r| match r {
            Record::Quarantine(mut q) => {
                q.source.clear();
                q.id.clear();
                Record::Quarantine(q)
            }
            r => r,
        })
        .collect()
}

#[test]
fn a_cut_gzip_read_on_threads_keeps_every_line_before_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let options = FormatOptions::Freebase(FreebaseOptions {
        english_only: false,
        names: false,
        ..Default::default()
    });
    let data = big_ntriples();
    let plain = write(dir.path(), "fb.nt", &data);
    let want = read_part(Format::Freebase, &options, &plain, None).unwrap();
    let gz = gzip(&data);
    let p = in_folder(dir.path(), "cut", "fb.nt", &gz[..gz.len() / 2]);
    let got = read_part(Format::Freebase, &options, &p, None).unwrap();
    let (last, head) = got.split_last().unwrap();
    assert!(head.len() > 1000 && head.len() < want.len() / 2 + 1000);
    assert!(strip_source(head.to_vec()) == strip_source(want[..head.len()].to_vec()));
    let Record::Quarantine(q) = last else {
        panic!("{last:?}");
    };
    assert_eq!(q.reason, "truncated_input");
    // The cut is placed at the line after the last one read.
    let line = q.line.unwrap() as usize;
    let offset: usize = data
        .split_inclusive(|b| *b == b'\n')
        .take(line - 1)
        .map(<[u8]>::len)
        .sum();
    assert_eq!(q.byte_offset, Some(offset as u64));
    let read_lines = head
        .iter()
        .rev()
        .find_map(|r| match r {
            Record::Triple(t) => t.line,
            Record::Quarantine(q) => q.line,
            _ => None,
        })
        .unwrap();
    assert!(read_lines < line as u64);
}

#[test]
fn unsplittable_inputs_are_one_range_and_refuse_a_cut() {
    let dir = tempfile::tempdir().unwrap();
    let data = ntriples_with_bad_lines();
    let gz = write(dir.path(), "fb.nt.gz", &gzip(&data));
    let options = FormatOptions::default_for(Format::Freebase);
    let size = std::fs::metadata(&gz).unwrap().len();
    let loc = gz.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    assert_eq!(
        split_ranges(Format::Freebase, &ctx, 100, None).unwrap(),
        vec![ByteRange::new(0, size)]
    );
    // The whole range reads as without one, line numbers included.
    let whole = read_part(Format::Freebase, &options, &gz, None).unwrap();
    let ranged = read_part(
        Format::Freebase,
        &options,
        &gz,
        Some(ByteRange::new(0, size)),
    )
    .unwrap();
    assert_eq!(ranged, whole);
    let err = read_part(
        Format::Freebase,
        &options,
        &gz,
        Some(ByteRange::new(0, size / 2)),
    );
    assert!(err.is_err());

    // A JSON array cannot be split; a small file is one range.
    if let Some(p) = shared("hotpotqa/hotpot_dev_distractor_v1.head.json") {
        let options = FormatOptions::default_for(Format::HotpotQa);
        let loc = p.to_str().unwrap().to_string();
        let ctx = InputCtx::local(&loc, &options);
        let size = std::fs::metadata(&p).unwrap().len();
        assert_eq!(
            split_ranges(Format::HotpotQa, &ctx, 1000, None).unwrap(),
            vec![ByteRange::new(0, size)]
        );
        assert!(
            read_part(
                Format::HotpotQa,
                &options,
                &p,
                Some(ByteRange::new(10, size))
            )
            .is_err()
        );
    }
    let plain = write(dir.path(), "fb.nt", &data);
    let loc = plain.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    let n = data.len() as u64;
    assert_eq!(
        split_ranges(Format::Freebase, &ctx, n, None).unwrap(),
        vec![ByteRange::new(0, n)]
    );
    assert_eq!(
        split_ranges(Format::Freebase, &ctx, 0, None).unwrap(),
        vec![ByteRange::new(0, n)]
    );

    // Readers that know nothing of ranges refuse a cut.
    let tsv = write(
        dir.path(),
        "test.txt",
        b"/m/a\t/r/x\t/m/b\n/m/b\t/r/y\t/m/c\n",
    );
    let fb15k = FormatOptions::default_for(Format::Fb15k);
    assert!(read_part(Format::Fb15k, &fb15k, &tsv, Some(ByteRange::new(0, 3))).is_err());
    assert!(
        read_part(
            Format::Fb15k,
            &fb15k,
            &tsv,
            Some(ByteRange::new(0, 1 << 20))
        )
        .is_ok()
    );
    // A range that ends before it starts.
    assert!(
        read_part(
            Format::Freebase,
            &options,
            &plain,
            Some(ByteRange::new(9, 3))
        )
        .is_err()
    );
}

/// A sink that fails after some records: a ranged or threaded read stops with the error.
struct FailingSink(usize);

impl RecordSink for FailingSink {
    fn emit(&mut self, _: Record) -> Result<(), distillery_core::SinkError> {
        if self.0 == 0 {
            return Err(distillery_core::SinkError("closed".into()));
        }
        self.0 -= 1;
        Ok(())
    }
}

#[test]
fn a_closed_sink_stops_a_threaded_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "fb.nt.gz", &gzip(&big_ntriples()));
    let options = FormatOptions::default_for(Format::Freebase);
    let loc = p.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    assert!(read_input(Format::Freebase, &ctx, &mut FailingSink(100)).is_err());
}
