//! Tests of the kb readers.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use distillery_core::spec::{
    Fb15kOptions, Format, FormatOptions, FreebaseOptions, WikidataOptions,
};

use crate::common::{bundled, read, read_with, shared};

fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

fn gzip(content: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(content).unwrap();
    enc.finish().unwrap()
}

fn freebase_opts(english_only: bool, names: bool) -> FormatOptions {
    FormatOptions::Freebase(FreebaseOptions {
        english_only,
        names,
        ..Default::default()
    })
}

fn count_by<'a>(items: impl Iterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    let mut m = HashMap::new();
    for i in items {
        *m.entry(i).or_insert(0) += 1;
    }
    m
}

/// Reads `content` (many lines) gzipped and cut to 60% of its compressed size: the lines
/// before the cut are kept, in order from line 1, and one `truncated_input` record names the
/// file, the byte offset after the last complete line and the line that was cut.
fn assert_truncated_gzip_keeps_the_head(format: Format, options: FormatOptions, content: &str) {
    let dir = tempfile::tempdir().unwrap();
    let gz = gzip(content.as_bytes());
    let p = write(dir.path(), "cut.gz", &gz[..gz.len() * 6 / 10]);
    let s = read_with(format, options, &p);
    let q = s.quarantine();
    assert_eq!(q.len(), 1, "{q:#?}");
    assert_eq!(q[0].reason, "truncated_input");
    assert_eq!(q[0].source, p.to_str().unwrap());
    let t = s.edges();
    let total = content.lines().count();
    assert!(!t.is_empty() && t.len() < total, "{} of {total}", t.len());
    let last = t.last().unwrap().line.unwrap();
    // Every line up to the cut was read (the wikidata test has one entity line per triple
    // group, so compare lines rather than counts).
    let kept_bytes: usize = content
        .split_inclusive('\n')
        .take(last as usize)
        .map(str::len)
        .sum();
    assert!(q[0].line.unwrap() > last, "{:?} vs {last}", q[0].line);
    assert!(q[0].byte_offset.unwrap() >= kept_bytes as u64);
    assert!(q[0].byte_offset.unwrap() < content.len() as u64);
}

// ---------------------------------------------------------------- freebase

#[test]
fn freebase_real_head_with_english_filter_keeps_nothing() {
    let Some(p) = shared("freebase/freebase-rdf-latest.head10k.nt") else {
        return;
    };
    // The 10k head is schema triples about `american_football.*` ... `award.*` types and
    // properties: no subject is an `ns:m.`/`ns:g.` node, so the English filter drops every
    // line. Independent count of the lines the filter could keep:
    //   awk -F'\t' '$1 ~ /^<http:\/\/rdf\.freebase\.com\/ns\/[mg]\./' FILE | wc -l   → 0
    let s = read(Format::Freebase, &p);
    assert_eq!(s.edges().len(), 0);
    assert_eq!(s.entities().len(), 0);
    assert_eq!(s.quarantine().len(), 0);
}

#[test]
fn freebase_real_head_unfiltered() {
    let Some(p) = shared("freebase/freebase-rdf-latest.head10k.nt") else {
        return;
    };
    let s = read_with(Format::Freebase, freebase_opts(false, true), &p);
    // wc -l FILE → 10000; every line is a valid statement.
    assert_eq!(s.quarantine().len(), 0);
    let t = s.edges();
    assert_eq!(t.len(), 10_000);
    // cut -f3 FILE | grep -c '^<http://rdf.freebase.com/ns/[mg]\.'   → 9945 entity objects
    // cut -f3 FILE | grep -c '^"'                                     → 17 literals
    // cut -f3 FILE | grep '^<' | grep -vc '^<http://rdf.freebase.com/ns/[mg]\.' → 38 IRIs
    let kinds = count_by(t.iter().map(|t| t.object_kind.as_str()));
    assert_eq!(kinds.get("entity"), Some(&9945));
    assert_eq!(kinds.get("literal"), Some(&17));
    assert_eq!(kinds.get("iri"), Some(&38));
    // cut -f3 FILE | grep -c '@en$' → 12 English literals; the other 5 are untagged.
    assert_eq!(
        t.iter().filter(|t| t.lang.as_deref() == Some("en")).count(),
        12
    );
    assert_eq!(
        (
            t[0].subject.as_str(),
            t[0].predicate.as_str(),
            t[0].object.as_str()
        ),
        (
            "american_football.football_player.footballdb_id",
            "type.object.type",
            "type.property"
        )
    );
    assert_eq!(t[1].object, "footballdb ID");
    assert_eq!(t[4].predicate, "http://www.w3.org/2000/01/rdf-schema#label");
    let last = t.last().unwrap();
    assert_eq!(
        (last.subject.as_str(), last.object.as_str(), last.line),
        ("award.award_winner", "m.0y47fy2", Some(10_000))
    );
    assert!(
        t.iter()
            .enumerate()
            .all(|(i, t)| t.line == Some(i as u64 + 1))
    );
    // grep -c 'type.object.name>' FILE → 6 names, all @en.
    let e = s.entities();
    assert_eq!(e.len(), 6);
    assert_eq!(e[0].key, "american_football.football_player.footballdb_id");
    assert_eq!(e[0].label.as_deref(), Some("footballdb ID"));
}

#[test]
fn freebase_bundled_quickstart() {
    let p = bundled("quickstart/freebase.nt");
    let s = read(Format::Freebase, &p);
    // 25 lines; the filter drops 2 @fr names, 1 @nb alias, 1 schema subject and 1 non-ns
    // IRI object.
    let t = s.edges();
    assert_eq!(t.len(), 20);
    assert!(s.quarantine().is_empty());
    assert!(t.iter().all(|t| t.subject.starts_with("m.")));
    assert!(t.iter().all(|t| t.lang.as_deref() != Some("fr")));
    let date = t
        .iter()
        .find(|t| t.predicate == "film.film.initial_release_date")
        .unwrap();
    assert_eq!(
        (date.object.as_str(), date.datatype.as_deref()),
        ("2011-09-16", Some("xsd:date"))
    );
    let e = s.entities();
    assert_eq!(e.len(), 9);
    let norway: Vec<_> = e.iter().filter(|e| e.key == "m.0qk1b03").collect();
    assert_eq!(
        (norway[0].label.as_deref(), norway[1].aliases.clone()),
        (Some("Norway"), vec!["Kingdom of Norway".to_string()])
    );
    let oskar = e.iter().find(|e| e.key == "m.0qk1b02").unwrap();
    assert_eq!(
        (oskar.label.as_deref(), oskar.lang.as_deref()),
        (Some("Oskar Vey"), None)
    );
    let all = read_with(Format::Freebase, freebase_opts(false, true), &p);
    assert_eq!(all.edges().len(), 25);
    assert_eq!(all.entities().len(), 10);
}

#[test]
fn freebase_broken_line_is_quarantined_and_reading_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let good = |i: u32| {
        format!(
            "<http://rdf.freebase.com/ns/m.0{i}>\t<http://rdf.freebase.com/ns/people.person.age>\t\"{i}\"^^<http://www.w3.org/2001/XMLSchema#int>\t.\n"
        )
    };
    let broken =
        "<http://rdf.freebase.com/ns/m.0x>\t<http://rdf.freebase.com/ns/p>\t\"unterminated\t.\n";
    let content = format!("{}{}{broken}{}", good(1), good(2), good(3));
    let p = write(dir.path(), "fb.nt", content.as_bytes());
    let s = read(Format::Freebase, &p);
    let t = s.edges();
    assert_eq!(
        t.iter()
            .map(|t| (t.subject.as_str(), t.line))
            .collect::<Vec<_>>(),
        vec![("m.01", Some(1)), ("m.02", Some(2)), ("m.03", Some(4))]
    );
    let q = s.quarantine();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].reason, "bad_ntriples");
    assert_eq!(q[0].line, Some(3));
    assert_eq!(
        q[0].byte_offset,
        Some((good(1).len() + good(2).len()) as u64)
    );
    assert_eq!(q[0].excerpt, broken.trim_end());
    assert!(
        q[0].detail.contains("unterminated literal"),
        "{}",
        q[0].detail
    );
}

#[test]
fn freebase_invalid_utf8_line_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let mut content = Vec::new();
    content.extend_from_slice(b"<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/type.object.name> \"ok\"@en .\n");
    content.extend_from_slice(b"<http://rdf.freebase.com/ns/m.02> <http://rdf.freebase.com/ns/type.object.name> \"bad \xff\xfe\"@en .\n");
    content.extend_from_slice(b"<http://rdf.freebase.com/ns/m.03> <http://rdf.freebase.com/ns/type.object.name> \"also ok\"@en .");
    let p = write(dir.path(), "fb.nt", &content);
    let s = read(Format::Freebase, &p);
    assert_eq!(s.edges().len(), 2);
    assert_eq!(s.entities().len(), 2);
    let q = s.quarantine();
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].reason.as_str(), q[0].line), ("invalid_utf8", Some(2)));
}

#[test]
fn freebase_gzip_is_read_and_truncated_gzip_keeps_the_head() {
    let mut content = String::new();
    for i in 0..3000 {
        content.push_str(&format!(
            "<http://rdf.freebase.com/ns/m.0{i:05x}>\t<http://rdf.freebase.com/ns/common.topic.description>\t\"Entity number {i} with a long enough description {}\"@en\t.\n",
            i * 7919 % 10007
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "fb.nt.gz", &gzip(content.as_bytes()));
    let s = read(Format::Freebase, &p);
    assert_eq!(s.edges().len(), 3000);
    assert!(s.quarantine().is_empty());
    assert_truncated_gzip_keeps_the_head(
        Format::Freebase,
        FormatOptions::default_for(Format::Freebase),
        &content,
    );
}

#[test]
fn freebase_zstd_reads_the_same_and_a_cut_one_keeps_the_head() {
    let plain = bundled("quickstart/freebase.nt");
    let dir = tempfile::tempdir().unwrap();
    // Same file name as the plain copy, so the ids match too.
    let raw = std::fs::read(&plain).unwrap();
    let p = write(
        dir.path(),
        "freebase.nt",
        &zstd::encode_all(raw.as_slice(), 3).unwrap(),
    );
    let want = read(Format::Freebase, &plain).records;
    assert_eq!(want.len(), 29);
    assert_eq!(read(Format::Freebase, &p).records, want);

    let mut content = String::new();
    for i in 0..3000 {
        content.push_str(&format!(
            "<http://rdf.freebase.com/ns/m.0{i:05x}>\t<http://rdf.freebase.com/ns/common.topic.description>\t\"Entity {i}, {}\"@en\t.\n",
            i * 7919 % 10007
        ));
    }
    let z = zstd::encode_all(content.as_bytes(), 3).unwrap();
    let p = write(dir.path(), "cut.nt.zst", &z[..z.len() * 6 / 10]);
    let s = read(Format::Freebase, &p);
    let q = s.quarantine();
    assert_eq!(q.len(), 1, "{q:#?}");
    assert_eq!(q[0].reason, "truncated_input");
    let t = s.edges();
    assert!(!t.is_empty() && t.len() < 3000, "{}", t.len());
    let lines: Vec<u64> = t.iter().map(|t| t.line.unwrap()).collect();
    assert_eq!(lines, (1..=t.len() as u64).collect::<Vec<_>>());
}

// ---------------------------------------------------------------- wikidata

#[test]
fn wikidata_real_sample() {
    let Some(p) = shared("wikidata/entities.first35.json") else {
        return;
    };
    // Counts computed independently with Python's json module over the 35 entity lines:
    // value mainsnaks 2908 (4 novalue + 1 somevalue skipped), of which 287 monolingual texts
    // are not English → 2621 triples: 1339 entity ids, 816 strings, 409 quantities,
    // 26 coordinates, 16 times, 15 English monolingual texts; 677 have a P585/P580 qualifier.
    let s = read(Format::Wikidata, &p);
    assert!(s.quarantine().is_empty(), "{:#?}", s.quarantine());
    let e = s.entities();
    assert_eq!(e.len(), 35);
    assert_eq!(e[0].key, "Q22");
    assert_eq!(e[0].label.as_deref(), Some("Scotland"));
    assert_eq!(
        e[0].description.as_deref(),
        Some("country in North-West Europe, part of the United Kingdom")
    );
    assert_eq!(
        e[0].aliases,
        vec![
            "Alba",
            "Scotland, United Kingdom",
            "SCT",
            "Caledonia",
            "scot"
        ]
    );
    assert_eq!(e[34].key, "Q209");
    let t = s.edges();
    assert_eq!(t.len(), 2621);
    let kinds = count_by(t.iter().map(|t| t.object_kind.as_str()));
    assert_eq!((kinds["entity"], kinds["literal"]), (1339, 1282));
    // Entity edges are `triples`, the values `literals`.
    assert_eq!((s.triples().len(), s.literals().len()), (1339, 1282));
    assert!(s.triples().iter().all(|t| t.object_kind == "entity"));
    let dts = count_by(t.iter().filter_map(|t| t.datatype.as_deref()));
    assert_eq!((dts["quantity"], dts["time"]), (409, 16));
    assert_eq!(t.iter().filter(|t| t.lang.is_some()).count(), 15);
    assert_eq!(t.iter().filter(|t| t.time.is_some()).count(), 677);
    let find = |s: &str, p: &str| {
        t.iter()
            .find(|t| t.subject == s && t.predicate == p)
            .unwrap()
    };
    let area = find("Q22", "P2046");
    assert_eq!(area.object, "+78782 Q712226");
    assert_eq!(area.subject_name.as_deref(), Some("Scotland"));
    assert_eq!(area.line, Some(2));
    assert_eq!(find("Q22", "P625").object, "57,-5");
    assert_eq!(
        (
            find("Q22", "P17").object.as_str(),
            find("Q22", "P17").object_name.as_ref()
        ),
        ("Q145", None)
    );
    assert_eq!(find("Q31", "P571").object, "+1830-10-04T00:00:00Z");
    assert!(t.iter().any(|t| t.subject == "Q31"
        && t.predicate == "P1082"
        && t.object == "+11150516"
        && t.time.as_deref() == Some("+2014-01-01T00:00:00Z")));

    // Two languages: every one of the 35 entities has an English and a French label.
    let fr = read_with(
        Format::Wikidata,
        FormatOptions::Wikidata(WikidataOptions {
            languages: vec!["en".into(), "fr".into()],
            ..Default::default()
        }),
        &p,
    );
    assert_eq!(fr.entities().len(), 70);
    assert_eq!(fr.entities()[1].label.as_deref(), Some("\u{c9}cosse"));
    // 2621 + the monolingual texts in French.
    assert!(fr.edges().len() > 2621);

    // The same dump gzipped reads the same.
    let dir = tempfile::tempdir().unwrap();
    let gz = write(
        dir.path(),
        "dump.json.gz",
        &gzip(&std::fs::read(&p).unwrap()),
    );
    let g = read(Format::Wikidata, &gz);
    assert_eq!((g.entities().len(), g.edges().len()), (35, 2621));
}

#[test]
fn wikidata_bad_json_and_missing_id_are_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        "[",
        r#"{"type":"item","id":"Q1","labels":{"en":{"language":"en","value":"One"}},"claims":{}},"#,
        r#"{"type":"item","id":"Q2","labels":{"en":{"language":"en","value":"Two"}},"claims":{"P31":[{"mainsnak":{"#,
        r#"{"type":"item","labels":{"en":{"language":"en","value":"No id"}},"claims":{}},"#,
        r#"{"type":"item","id":"Q4","labels":{"en":{"language":"en","value":"Four"}},"claims":{"P31":[{"mainsnak":{"snaktype":"value","property":"P31","datavalue":{"value":{"entity-type":"item","numeric-id":5,"id":"Q5"},"type":"wikibase-entityid"}}}]}}"#,
        "]",
    ];
    let content = lines.join("\n");
    let p = write(dir.path(), "wd.json", content.as_bytes());
    let s = read(Format::Wikidata, &p);
    assert_eq!(
        s.entities()
            .iter()
            .map(|e| e.key.as_str())
            .collect::<Vec<_>>(),
        vec!["Q1", "Q4"]
    );
    assert_eq!(s.edges().len(), 1);
    assert_eq!(s.edges()[0].line, Some(5));
    let q = s.quarantine();
    assert_eq!(
        q.iter()
            .map(|q| (q.reason.as_str(), q.line))
            .collect::<Vec<_>>(),
        vec![("bad_json", Some(3)), ("missing_field", Some(4))]
    );
    let offset3 = lines[..2].iter().map(|l| l.len() + 1).sum::<usize>();
    assert_eq!(q[0].byte_offset, Some(offset3 as u64));
}

#[test]
fn wikidata_truncated_gzip_keeps_the_head() {
    let mut content = String::from("[\n");
    for i in 0..1500 {
        content.push_str(&format!(
            r#"{{"type":"item","id":"Q{i}","labels":{{"en":{{"language":"en","value":"Item {i} {}"}}}},"claims":{{"P1082":[{{"mainsnak":{{"snaktype":"value","property":"P1082","datavalue":{{"value":{{"amount":"+{}","unit":"1"}},"type":"quantity"}}}}}}]}}}},"#,
            i * 7919 % 10007,
            i * 104_729 % 99_991
        ));
        content.push('\n');
    }
    content.push_str("]\n");
    assert_truncated_gzip_keeps_the_head(
        Format::Wikidata,
        FormatOptions::default_for(Format::Wikidata),
        &content,
    );
}

// ---------------------------------------------------------------- fb15k

fn fb15k_opts(names: &[&str]) -> FormatOptions {
    FormatOptions::Fb15k(Fb15kOptions {
        names: names.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
}

#[test]
fn fb15k_real_test_split_with_names() {
    let Some(p) = shared("fb15k237/test.tsv") else {
        return;
    };
    // wc -l test.tsv → 20466 (CRLF lines);
    // tr -d '\r' < test.tsv | awk -F'\t' '{print $1; print $3}' | sort -u | wc -l → 10348 mids.
    let bare = read(Format::Fb15k, &p);
    assert_eq!(bare.edges().len(), 20_466);
    assert_eq!(bare.entities().len(), 10_348);
    assert!(bare.quarantine().is_empty());
    assert!(bare.edges().iter().all(|t| t.subject_name.is_none()));
    assert!(bare.entities().iter().all(|e| e.label.is_none()));

    // Relative names are found beside test.tsv; every mid of the split has a name in both.
    for names in ["FB15k_mid2name.txt", "entity2text.txt"] {
        let s = read_with(Format::Fb15k, fb15k_opts(&[names]), &p);
        let t = s.edges();
        assert_eq!(t.len(), 20_466);
        assert!(s.quarantine().is_empty());
        assert!(
            t.iter()
                .all(|t| t.subject_name.is_some() && t.object_name.is_some())
        );
        assert!(t.iter().all(|t| t.object_kind == "entity"));
        assert_eq!(
            (
                t[0].subject.as_str(),
                t[0].predicate.as_str(),
                t[0].object.as_str()
            ),
            (
                "/m/08966",
                "/travel/travel_destination/climate./travel/travel_destination_monthly_climate/month",
                "/m/05lf_"
            )
        );
        assert_eq!(t[0].subject_name.as_deref(), Some("Z\u{fc}rich"));
        assert_eq!(t[0].object_name.as_deref(), Some("October"));
        assert_eq!(t[20_465].line, Some(20_466));
        let e = s.entities();
        assert_eq!(e.len(), 10_348);
        assert!(e.iter().all(|e| e.label.is_some()));
        // mid2name writes `Gary_Rydstrom`, entity2text `Gary Rydstrom`.
        let gary = e.iter().find(|e| e.key == "/m/0c94fn").unwrap();
        assert_eq!(gary.label.as_deref(), Some("Gary Rydstrom"), "{names}");
    }
}

#[test]
fn fb15k_two_field_line_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "valid.txt",
        b"/m/a\t/r/x\t/m/b\n/m/a\t/r/only_two\n/m/b\t/r/y\t/m/c\n",
    );
    write(dir.path(), "entity2text.txt", b"/m/a\tAlpha\n/m/c\tGamma\n");
    let s = read_with(Format::Fb15k, fb15k_opts(&["entity2text.txt"]), &p);
    let t = s.edges();
    assert_eq!(t.len(), 2);
    assert_eq!(
        (t[0].subject_name.as_deref(), t[0].object_name.as_deref()),
        (Some("Alpha"), None)
    );
    assert_eq!(t[1].line, Some(3));
    assert_eq!(s.entities().len(), 3);
    let q = s.quarantine();
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].reason.as_str(), q[0].line), ("bad_tsv", Some(2)));
    assert_eq!(q[0].byte_offset, Some(15));
}

#[test]
fn fb15k_truncated_gzip_keeps_the_head() {
    let mut content = String::new();
    for i in 0..4000 {
        content.push_str(&format!(
            "/m/0{:x}\t/film/film/genre\t/m/0{:x}\n",
            i * 7919 % 100_003,
            i * 104_729 % 99_991
        ));
    }
    assert_truncated_gzip_keeps_the_head(Format::Fb15k, fb15k_opts(&[]), &content);
}

// ---------------------------------------------------------------- metaqa-kb

#[test]
fn metaqa_kb_real_head() {
    let Some(p) = shared("metaqa/kb.head.txt") else {
        return;
    };
    // wc -l → 630; awk -F'|' 'NF!=3' kb.head.txt | wc -l → 0;
    // cut -d'|' -f2 kb.head.txt | sort | uniq -c → starred_actors 150, has_tags 149, ...
    let s = read(Format::MetaQaKb, &p);
    assert!(s.quarantine().is_empty());
    let t = s.edges();
    assert_eq!(t.len(), 630);
    let rel = count_by(t.iter().map(|t| t.predicate.as_str()));
    assert_eq!(rel.len(), 9);
    assert_eq!(
        (
            rel["starred_actors"],
            rel["has_tags"],
            rel["written_by"],
            rel["release_year"]
        ),
        (150, 149, 102, 73)
    );
    assert_eq!(
        (
            rel["directed_by"],
            rel["has_genre"],
            rel["in_language"],
            rel["has_imdb_rating"],
            rel["has_imdb_votes"]
        ),
        (70, 63, 21, 1, 1)
    );
    assert_eq!(
        (
            t[0].subject.as_str(),
            t[0].predicate.as_str(),
            t[0].object.as_str()
        ),
        ("Kismet", "directed_by", "William Dieterle")
    );
    assert_eq!(t[0].object_name.as_deref(), Some("William Dieterle"));
    assert_eq!(t[0].object_kind, "entity");
    assert_eq!((t[629].subject.as_str(), t[629].line), ("Sabah", Some(630)));
}

#[test]
fn metaqa_kb_bundled_quickstart() {
    let s = read(Format::MetaQaKb, &bundled("quickstart/kb.txt"));
    assert!(s.quarantine().is_empty());
    assert_eq!(s.edges().len(), 31);
    let directors: Vec<_> = s
        .edges()
        .iter()
        .filter(|t| t.predicate == "directed_by")
        .map(|t| (t.subject.clone(), t.object.clone()))
        .collect();
    assert_eq!(directors.len(), 4);
    assert!(directors.contains(&("Paper Comets".into(), "Ines Calloway".into())));
}

#[test]
fn metaqa_kb_two_field_line_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "kb.txt",
        "Kismet|directed_by|William Dieterle\nKismet|release_year\nKismet|release_year|1944\n"
            .as_bytes(),
    );
    let s = read(Format::MetaQaKb, &p);
    assert_eq!(s.edges().len(), 2);
    let q = s.quarantine();
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].reason.as_str(), q[0].line), ("bad_kb_line", Some(2)));
    assert_eq!(q[0].excerpt, "Kismet|release_year");
}

#[test]
fn metaqa_kb_truncated_gzip_keeps_the_head() {
    let mut content = String::new();
    for i in 0..4000 {
        content.push_str(&format!(
            "Movie {}|starred_actors|Actor {}\n",
            i * 7919 % 100_003,
            i * 104_729 % 99_991
        ));
    }
    assert_truncated_gzip_keeps_the_head(
        Format::MetaQaKb,
        FormatOptions::default_for(Format::MetaQaKb),
        &content,
    );
}

/// WikiOFGraph's released samples: one document and its triples per line, the triples in
/// order and, rendered in RAS's form, the line's `triplet` with WikiOFGraph's markers
/// rewritten (here with plain string replaces).
#[test]
fn wikiofgraph_real_samples() {
    for (file, lines) in [
        ("wikiofgraph/example_filtered.jsonl", 10),
        ("wikiofgraph/wikiofgraph_gpteval_sample1000.jsonl", 1000),
    ] {
        let Some(p) = shared(file) else {
            return;
        };
        let s = read(Format::WikiOfGraph, &p);
        let raw: Vec<serde_json::Value> = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(raw.len(), lines);
        let docs = s.documents();
        let bad = s.quarantine();
        assert_eq!(docs.len() + bad.len(), lines, "{file}");
        assert!(bad.iter().all(|q| q.reason == "bad_triplet"), "{bad:?}");
        let triples = s.triples();
        let mut at = 0;
        for (n, r) in raw.iter().enumerate() {
            if bad.iter().any(|q| q.line == Some(n as u64 + 1)) {
                continue;
            }
            let text = r["text"].as_str().unwrap();
            let want = r["triplet"]
                .as_str()
                .unwrap()
                .trim()
                .replace("(<S> ", "(S> ")
                .replace("| <P> ", "| P> ")
                .replace("| <O> ", "| O> ");
            let doc = docs.iter().find(|d| d.text == text).unwrap();
            let mine: Vec<String> = triples[at..]
                .iter()
                .take_while(|t| t.document_id.as_deref() == Some(doc.id.as_str()))
                .map(|t| format!("(S> {}| P> {}| O> {})", t.subject, t.predicate, t.object))
                .collect();
            at += mine.len();
            assert_eq!(mine.join(", "), want, "{file} line {}", n + 1);
            assert_eq!(triples[at - 1].line, Some(n as u64 + 1));
        }
        assert_eq!(at, triples.len());
        eprintln!(
            "{file}: {} documents, {} triples, {} quarantined",
            docs.len(),
            triples.len(),
            bad.len()
        );
    }
}

/// A WikiOFGraph record repeated whole is one document; one with the same text but other
/// triples is another, so its target is never merged with the first's.
#[test]
fn wikiofgraph_repeated_records() {
    let dir = tempfile::tempdir().unwrap();
    let a = r#"{"triplet": "(<S> A| <P> p| <O> b)", "text": "A p b."}"#;
    let b = r#"{"triplet": "(<S> A| <P> q| <O> c)", "text": "A p b."}"#;
    let p = write(dir.path(), "w.jsonl", format!("{a}\n{a}\n{b}\n").as_bytes());
    let s = read(Format::WikiOfGraph, &p);
    let docs = s.documents();
    assert_eq!(docs.len(), 2);
    assert_ne!(docs[0].id, docs[1].id);
    let t = s.triples();
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].document_id.as_deref(), Some(docs[0].id.as_str()));
    assert_eq!((t[1].predicate.as_str(), t[1].line), ("q", Some(3)));
    assert!(s.quarantine().is_empty());
}
