//! The typed reader against the `Value` reader: the same records, problems and error
//! messages for every entity, well-formed or not; and the typed reader taking the real-shaped
//! ones itself.

use super::*;
use distillery_core::VecSink;

/// An entity in today's dump layout with every value type, escapes, qualifiers the time is
/// read from (and a `somevalue` one it skips), references, sitelinks and an unknown field.
const RICH: &str = r#"{"type":"item","id":"Q64","labels":{"en":{"language":"en","value":"Berlin"},"de":{"language":"de","value":"Berlin"},"fr":{"language":"fr","value":"Berl\u00edn \"B\""},"zh-hant":{"language":"zh-hant","value":"柏林 \ud83d\ude00"},"en-gb":{"language":"en-gb","value":"Berlin"}},"descriptions":{"en":{"language":"en","value":"capital of Germany"},"ru":{"language":"ru","value":"столица"}},"aliases":{"en":[{"language":"en","value":"Berlin, Germany"},{"language":"en","value":"DE-BE"}],"de":[{"language":"de","value":"Spree-Athen"}]},"claims":{"P31":[{"mainsnak":{"snaktype":"value","property":"P31","hash":"a1","datavalue":{"value":{"entity-type":"item","numeric-id":515,"id":"Q515"},"type":"wikibase-entityid"},"datatype":"wikibase-item"},"type":"statement","qualifiers":{"P580":[{"snaktype":"somevalue","property":"P580","hash":"b"},{"snaktype":"value","property":"P580","datavalue":{"value":{"time":"+1237-00-00T00:00:00Z","timezone":0,"before":0,"after":0,"precision":9,"calendarmodel":"http://www.wikidata.org/entity/Q1985727"},"type":"time"},"datatype":"time"}],"P642":[{"snaktype":"value","property":"P642","datavalue":{"value":{"entity-type":"item","numeric-id":183,"id":"Q183"},"type":"wikibase-entityid"}}]},"qualifiers-order":["P580","P642"],"id":"Q64$1","rank":"preferred","references":[{"hash":"c","snaks":{"P143":[{"snaktype":"value","property":"P143","datavalue":{"value":{"entity-type":"item","numeric-id":328,"id":"Q328"},"type":"wikibase-entityid"},"datatype":"wikibase-item"}],"P813":[{"snaktype":"value","property":"P813","datavalue":{"value":{"time":"+2020-01-01T00:00:00Z","timezone":0,"before":0,"after":0,"precision":11,"calendarmodel":"http://www.wikidata.org/entity/Q1985727"},"type":"time"}}]},"snaks-order":["P143","P813"]}]},{"mainsnak":{"snaktype":"value","property":"P31","datavalue":{"value":{"entity-type":"item","numeric-id":200250},"type":"wikibase-entityid"}},"type":"statement","rank":"normal"}],"P1082":[{"mainsnak":{"snaktype":"value","property":"P1082","datavalue":{"value":{"amount":"+3644826","unit":"1","upperBound":"+3644827","lowerBound":"+3644825"},"type":"quantity"},"datatype":"quantity"},"type":"statement","qualifiers":{"P585":[{"snaktype":"value","property":"P585","datavalue":{"value":{"time":"+2018-12-31T00:00:00Z","precision":11},"type":"time"}}],"P580":[{"snaktype":"value","property":"P580","datavalue":{"value":{"time":"+2018-01-01T00:00:00Z"},"type":"time"}}]},"rank":"normal"}],"P2046":[{"mainsnak":{"snaktype":"value","property":"P2046","datavalue":{"value":{"amount":"+891.85","unit":"http://www.wikidata.org/entity/Q712226"},"type":"quantity"}},"type":"statement"}],"P625":[{"mainsnak":{"snaktype":"value","property":"P625","datavalue":{"value":{"latitude":52.516666666667,"longitude":13.383333333333,"altitude":null,"precision":0.016666666666667,"globe":"http://www.wikidata.org/entity/Q2"},"type":"globecoordinate"}},"type":"statement"}],"P1448":[{"mainsnak":{"snaktype":"value","property":"P1448","datavalue":{"value":{"text":"Berlin","language":"de"},"type":"monolingualtext"}},"type":"statement"},{"mainsnak":{"snaktype":"value","property":"P1448","datavalue":{"value":{"text":"Berl\u00edn","language":"fr"},"type":"monolingualtext"}},"type":"statement"}],"P214":[{"mainsnak":{"snaktype":"value","property":"P214","datavalue":{"value":"122530980","type":"string"},"datatype":"external-id"},"type":"statement"}],"P1151":[{"mainsnak":{"snaktype":"value","property":"P1151","datavalue":{"value":{"entity-type":"property","numeric-id":1151},"type":"wikibase-entityid"}},"type":"statement"}],"P569":[{"mainsnak":{"snaktype":"novalue","property":"P569"},"type":"statement"},{"mainsnak":{"snaktype":"value","property":"P569","datavalue":{"value":{"time":"+1237-10-28T00:00:00Z","precision":11},"type":"time"}},"type":"statement"}]},"sitelinks":{"enwiki":{"site":"enwiki","title":"Berlin","badges":[]},"dewiki":{"site":"dewiki","title":"Berlin","badges":["Q17437796"]},"en_gbwiki":{"site":"en_gbwiki","title":"Berlin (UK)","badges":[]},"zh_hantwiki":{"site":"zh_hantwiki","title":"柏林","badges":[]}},"lastrevid":123456,"modified":"2020-01-01T00:00:00Z"}"#;

/// Old dumps: `[]` for empty maps; MediaInfo entities name their claims `statements`.
const OLD: &[&str] = &[
    r#"{"id":"Q2","type":"item","labels":[],"descriptions":[],"aliases":[],"claims":[],"sitelinks":[]}"#,
    r#"{"id":"M5","type":"mediainfo","labels":{"en":{"language":"en","value":"A photo"}},"descriptions":[],"statements":{"P180":[{"mainsnak":{"snaktype":"value","property":"P180","datavalue":{"value":{"entity-type":"item","numeric-id":146,"id":"Q146"},"type":"wikibase-entityid"}},"type":"statement"}]}}"#,
    r#"{"id":"M6","claims":[],"statements":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":"x","type":"string"}}}]}}"#,
    r#"{"id":"M7","claims":{},"statements":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":"x","type":"string"}}}]}}"#,
];

/// Entities the typed reader must leave to the `Value` reader, or reads to the same end:
/// repeated keys, unusual types, bad values, and JSON the `Value` parse refuses in parts the
/// typed reader skips.
const ODD: &[&str] = &[
    r#"{"id":"Q1","labels":{"en":{"value":"a"},"en":{"value":"b"}}}"#,
    r#"{"id":"Q1","labels":{"en":{"value":"a","value":"b"}}}"#,
    r#"{"id":"Q1","labels":{"en":{"language":"en"}}}"#,
    r#"{"id":"Q1","labels":{"en":{"value":5}}}"#,
    r#"{"id":"Q1","labels":{"en":"One"}}"#,
    r#"{"id":"Q1","labels":["x"]}"#,
    r#"{"id":"Q1","labels":null}"#,
    r#"{"id":"Q1","labels":{},"labels":{}}"#,
    r#"{"id":5}"#,
    r#"{"id":""}"#,
    r#"{"labels":{}}"#,
    r#"["Q1"]"#,
    r#"[]"#,
    r#"5"#,
    r#"{"id":"Q1"} x"#,
    r#"{"id":"Q1","aliases":{"en":[{"value":"a"},{"language":"en"},5]}}"#,
    r#"{"id":"Q1","aliases":{"en":{"value":"a"}}}"#,
    r#"{"id":"Q1","sitelinks":{"enwiki":["Title"]}}"#,
    r#"{"id":"Q1","sitelinks":{"enwiki":["Title", 1]}}"#,
    r#"{"id":"Q1","sitelinks":{"enwiki":{"title":"T","title":"U"}}}"#,
    r#"{"id":"Q1","sitelinks":{"frwiki":{"site":"frwiki"}}}"#,
    r#"{"id":"Q1","sitelinks":{"enwiki":{"title":"T"},"enwiki":{"title":"U"}}}"#,
    r#"{"id":"Q1","sitelinks":null}"#,
    r#"{"id":"Q1","sitelinks":[1]}"#,
    r#"{"id":"Q1","claims":null,"statements":{"P1":[]}}"#,
    r#"{"id":"Q1","claims":[1]}"#,
    r#"{"id":"Q1","claims":{"P1":{}}}"#,
    r#"{"id":"Q1","claims":{"P1":[5,{"mainsnak":null}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"rank":"normal"}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":"a","type":"string"}}}],"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":"b","type":"string"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":[]}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":[]}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":5}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"amount":"+1","unit":5},"type":"quantity"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"numeric-id":5.0},"type":"wikibase-entityid"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"numeric-id":7,"entity-type":"form"},"type":"wikibase-entityid"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"latitude":"1","longitude":2},"type":"globecoordinate"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"latitude":1e2,"longitude":-0.0},"type":"globecoordinate"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"text":"x"},"type":"monolingualtext"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"language":"fr"},"type":"monolingualtext"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":"x"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"type":"string"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"time":"+1"},"type":"time","type":"time"}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"time":"+1"},"type":"time"}},"qualifiers":{"P585":{}}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"time":"+1"},"type":"time"}},"qualifiers":{"P585":[{"snaktype":"value","datavalue":{"value":"+2","type":"time"}}],"P580":[[],{"snaktype":"value","datavalue":{"value":{"time":"+3"},"type":"time"}}]}}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"time":"+1"},"type":"time"}},"qualifiers":[]}]}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":{"time":"+1"},"type":"time"}},"qualifiers":{"P585":[]},"qualifiers":{}}]}}"#,
    // Refused by a `Value` parse where the typed reader only skips: number range, lone
    // surrogates, invalid UTF-8, nesting depth; and the same in a field both skip.
    r#"{"id":"Q1","labels":{"fr":{"value":"a","n":1e400}}}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"novalue"},"references":[{"x":-1e999}]}]}}"#,
    r#"{"id":"Q1","labels":{"fr":{"value":"\ud800"}}}"#,
    r#"{"id":"Q1","labels":{"fr":{"value":"\udc00x"}}}"#,
    r#"{"id":"Q1","labels":{"fr":{"value":"\u12"}}}"#,
    r#"{"id":"Q1","labels":{"fr":{"value":"a\qb"}}}"#,
    r#"{"id":"Q1","extra":1e400,"more":"\ud800"}"#,
    r#"{"id":"Q1","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"value":"x","type":"string"}},"references":{"n":18446744073709551616}}]}}"#,
    r#"{"id":"Q1","lab\u0065ls":{"en":{"v\u0061lue":"esc"}}}"#,
    r#"{"id":"Q1","labels":{"\u0065n":{"value":"esc"}}}"#,
];

fn langs(l: &[&str]) -> WikidataOptions {
    WikidataOptions {
        languages: l.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

const CONFIGS: &[&[&str]] = &[
    &["en"],
    &["en", "de", "fr"],
    &["fr", "en"],
    &["zh-hant", "en-gb"],
    &["en", "en"],
    &[],
];

/// Whether both readers give `bytes` the same records and problems; true when the typed
/// reader read it itself.
fn same(opts: &WikidataOptions, bytes: &[u8]) -> bool {
    let want = value::records("wd.json", opts, bytes, Some(7));
    let got = entity_records("wd.json", opts, bytes, Some(7));
    assert_eq!(
        got,
        want,
        "{:?} with {:?}",
        String::from_utf8_lossy(bytes),
        opts.languages
    );
    typed::records("wd.json", opts, bytes, Some(7)).is_some()
}

#[test]
fn the_typed_reader_reads_real_shaped_entities_itself() {
    for config in CONFIGS {
        let opts = langs(config);
        for line in [super::tests::ENTITY, RICH].iter().chain(OLD) {
            assert!(
                same(&opts, line.as_bytes()),
                "left to the Value reader: {line}"
            );
        }
    }
    // Every kind of row and edge is there to compare.
    let (records, bad) =
        entity_records("wd.json", &langs(&["en", "fr"]), RICH.as_bytes(), None).unwrap();
    assert_eq!(bad, None);
    let rows = records
        .iter()
        .filter(|r| matches!(r, Record::Entity(_)))
        .count();
    assert_eq!(rows, 2);
    let objects: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Triple(t) | Record::Literal(t) => Some((t.object.as_str(), t.time.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(
        objects,
        [
            ("Q515", Some("+1237-00-00T00:00:00Z")),
            ("Q200250", None),
            ("+3644826", Some("+2018-12-31T00:00:00Z")),
            ("+891.85 Q712226", None),
            ("52.516666666667,13.383333333333", None),
            ("Berlín", None),
            ("122530980", None),
            ("P1151", None),
            ("+1237-10-28T00:00:00Z", None),
        ]
    );
}

#[test]
fn odd_entities_read_as_the_value_reader_reads_them() {
    for config in CONFIGS {
        let opts = langs(config);
        for line in ODD {
            same(&opts, line.as_bytes());
        }
        // Invalid UTF-8 in a skipped label and in a kept one; deep nesting in a skipped
        // reference and in a field both readers skip unchecked.
        for lang in ["ru", "en"] {
            let mut bad_utf8 =
                format!(r#"{{"id":"Q1","labels":{{"{lang}":{{"value":"a"#).into_bytes();
            bad_utf8.extend_from_slice(b"\xff\xfe\"}}}");
            same(&opts, &bad_utf8);
        }
        let deep = |field: &str| {
            format!(
                r#"{{"id":"Q1","{field}":{{"P1":[{{"mainsnak":{{"snaktype":"novalue"}},"references":{}{}}}]}}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            )
        };
        same(&opts, deep("claims").as_bytes());
        same(&opts, deep("unknown").as_bytes());
    }
}

/// `line` broken at every `stride`-th byte: cut there, the byte replaced, a fragment inserted.
/// Both readers must agree on each; returns the cases and how many the typed reader read.
fn mutations(opts: &WikidataOptions, line: &[u8], stride: usize) -> (usize, usize) {
    const BYTES: &[u8] = b"\"{}[],:0\\\xffn e";
    const INSERTS: &[&[u8]] = &[b",", b"\"x\":1,", b"[]", b"\"en\":{\"value\":\"v\"},"];
    let (mut cases, mut typed) = (0, 0);
    let mut check = |bytes: &[u8]| {
        cases += 1;
        typed += usize::from(same(opts, bytes));
    };
    for at in (0..line.len()).step_by(stride) {
        check(&line[..at]);
        for &b in BYTES {
            let mut m = line.to_vec();
            m[at] = b;
            check(&m);
        }
        for ins in INSERTS {
            let mut m = line[..at].to_vec();
            m.extend_from_slice(ins);
            m.extend_from_slice(&line[at..]);
            check(&m);
        }
    }
    (cases, typed)
}

#[test]
fn broken_entities_get_the_same_errors_and_records() {
    let (mut cases, mut typed) = (0, 0);
    // Every byte of the small entity, every 3rd with three languages, every 37th of the rich
    // one (a test build is slow).
    for (line, config, stride) in [
        (super::tests::ENTITY, &["en"][..], 1),
        (super::tests::ENTITY, &["en", "fr", "de"], 3),
        (RICH, &["en", "fr"], 37),
    ] {
        let (c, t) = mutations(&langs(config), line.as_bytes(), stride);
        cases += c;
        typed += t;
    }
    // Most mutations break the JSON (the Value reader reports it); some leave an entity the
    // typed reader reads (a space, a digit in a string, an extra field).
    assert!(typed > 0 && typed < cases, "{typed} of {cases}");
}

/// The shared sample of the real dump (`../shared/data`, see its README); skipped without it.
fn shared_sample() -> Option<Vec<u8>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/wikidata/entities.first35.json"
    );
    match std::fs::read(path) {
        Ok(b) => Some(b),
        Err(e) => {
            eprintln!("skipped: the shared Wikidata sample {path} is not readable ({e})");
            None
        }
    }
}

#[test]
fn the_shared_sample_reads_the_same_and_typed() {
    let Some(data) = shared_sample() else { return };
    let lines: Vec<&[u8]> = data
        .split(|&b| b == b'\n')
        .map(|l| l.trim_ascii())
        .filter(|l| !l.is_empty() && *l != b"[" && *l != b"]")
        .map(|l| l.strip_suffix(b",").unwrap_or(l))
        .collect();
    assert_eq!(lines.len(), 35);
    for config in CONFIGS {
        let opts = langs(config);
        for line in &lines {
            assert!(same(&opts, line), "left to the Value reader");
        }
    }
    // Broken copies of the shortest, at 40 places.
    let line = lines.iter().min_by_key(|l| l.len()).unwrap();
    mutations(&langs(&["en", "de"]), line, line.len() / 40 + 1);
}

#[test]
fn the_reader_writes_the_same_records_as_the_value_reader() {
    // The whole file through `read`, against each line through the `Value` reader with the
    // positions `read` gives it.
    let Some(data) = shared_sample() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wd.json");
    std::fs::write(&path, &data).unwrap();
    let opts = langs(&["en", "fr"]);
    let options = FormatOptions::Wikidata(opts.clone());
    let ctx = InputCtx::local(path.to_str().unwrap(), &options);
    let mut sink = VecSink::default();
    read(&ctx, &mut sink).unwrap();
    let mut want = Vec::new();
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        let l = line.trim_ascii();
        if l.is_empty() || l == b"[" || l == b"]" {
            continue;
        }
        let l = l.strip_suffix(b",").unwrap_or(l);
        let (records, bad) = value::records(&ctx.source, &opts, l, Some(i as u64 + 1)).unwrap();
        assert_eq!(bad, None);
        want.extend(records);
    }
    assert!(want.len() > 1000, "{}", want.len());
    assert_eq!(sink.records, want);
}
