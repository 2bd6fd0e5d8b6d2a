//! Revision-history exports and Wikimedia's daily adds-changes dumps read by `mediawiki`: one
//! document per page from its newest revision, with the revision's id, timestamp and SHA-1;
//! pages whose content model is not wikitext quarantined by name.

use std::collections::BTreeMap;
use std::io::Read;

use distillery_core::spec::{Format, FormatOptions, MediaWikiOptions};

use crate::common::{read_with, shared};

fn all_namespaces() -> FormatOptions {
    FormatOptions::MediaWiki(MediaWikiOptions {
        namespaces: Vec::new(),
        ..MediaWikiOptions::default()
    })
}

/// The newest revision of each page of an export, found by plain text search (not by the
/// reader's parser): page id -> (revision id, its `<sha1>`, its `<model>`).
fn newest_by_scan(xml: &str) -> BTreeMap<i64, (i64, String, String)> {
    let between = |s: &str, open: &str, close: &str| -> Option<String> {
        let a = s.find(open)? + open.len();
        let b = s[a..].find(close)? + a;
        Some(s[a..b].to_string())
    };
    let mut out = BTreeMap::new();
    for page in xml.split("<page>").skip(1) {
        let head = &page[..page.find("<revision>").unwrap()];
        let page_id: i64 = between(head, "<id>", "</id>").unwrap().parse().unwrap();
        for rev in page.split("<revision>").skip(1) {
            let rev = &rev[..rev.find("</revision>").unwrap()];
            let id: i64 = between(rev, "<id>", "</id>").unwrap().parse().unwrap();
            let sha1 = between(rev, "<sha1>", "</sha1>").unwrap_or_default();
            let model = between(rev, "<model>", "</model>").unwrap_or_default();
            let e = out
                .entry(page_id)
                .or_insert((id, sha1.clone(), model.clone()));
            if id > e.0 {
                *e = (id, sha1, model);
            }
        }
    }
    out
}

#[test]
fn a_daily_dump_keeps_each_pages_newest_revision() {
    let Some(p) = shared("wikimedia-incr/wikidatawiki-20140220-pages-meta-hist-incr.sample.xml")
    else {
        return;
    };
    let sink = read_with(Format::MediaWiki, all_namespaces(), &p);
    let docs = sink.documents();
    assert_eq!(docs.len(), 1, "the project page; Q1 is an entity");
    let d = docs[0];
    assert_eq!(d.title, "Wikidata:Contact the development team");
    assert_eq!((d.page_id, d.namespace), (Some(181), Some(4)));
    assert_eq!(d.revision_id, Some(110689770));
    assert_eq!(d.sha1.as_deref(), Some("ofkf3r8kinlbu9zvwk9m4r7g64o3gb5"));
    assert!(
        d.timestamp
            .as_deref()
            .is_some_and(|t| t.starts_with("2014-02-"))
    );
    assert!(!d.text.is_empty());
    let q = sink.quarantine();
    assert_eq!(q.len(), 1);
    // Q1's entity JSON is in the internal layout of 2014, named as such.
    assert_eq!(q[0].reason, "old_entity_layout");
    assert!(q[0].detail.contains("\"Q1\""), "{}", q[0].detail);
    assert!(q[0].detail.contains("110669245"), "{}", q[0].detail);
    assert!(sink.entities().is_empty() && sink.edges().is_empty());
}

#[test]
fn wikidata_pages_give_the_rows_of_the_json_reader() {
    let Some(p) = shared("wikimedia-incr/wikidata-testwiki-modern-entity-json.sample.xml.bz2")
    else {
        return;
    };
    let sink = read_with(Format::MediaWiki, all_namespaces(), &p);
    let keys: Vec<(&str, Option<&str>)> = sink
        .entities()
        .iter()
        .map(|e| (e.key.as_str(), e.label.as_deref()))
        .collect();
    assert_eq!(
        keys,
        vec![("Q6", Some("覔")), ("Q7", Some("覍")), ("Q12", Some("覓"))]
    );
    assert!(sink.entities().iter().all(|e| e.dataset == "wikidata"
        && e.description.as_deref() == Some("CJK (hanzi/kanji/hanja) character")));
    assert!(sink.quarantine().is_empty(), "{:?}", sink.quarantine());
    // The wikitext pages of the same file stay documents.
    assert!(
        sink.documents()
            .iter()
            .all(|d| d.title.starts_with("MediaWiki:"))
    );

    // Statements, as a daily dump holds them (model after the text, export 0.11), equal
    // what the JSON dump reader writes for the same entity.
    let entity = r#"{"type":"item","id":"Q42","labels":{"en":{"language":"en","value":"Douglas Adams"}},"descriptions":{},"aliases":{},"claims":{"P31":[{"mainsnak":{"snaktype":"value","property":"P31","datavalue":{"value":{"entity-type":"item","numeric-id":5,"id":"Q5"},"type":"wikibase-entityid"}},"type":"statement","rank":"normal"}],"P1477":[{"mainsnak":{"snaktype":"value","property":"P1477","datavalue":{"value":{"text":"Douglas Noël Adams","language":"en"},"type":"monolingualtext"}},"type":"statement","rank":"normal"}]},"sitelinks":{"enwiki":{"site":"enwiki","title":"Douglas Adams","badges":[]}}}"#;
    let tmp = tempfile::tempdir().unwrap();
    let xml = tmp
        .path()
        .join("wikidatawiki-20261205-pages-meta-hist-incr.xml");
    let escaped = entity
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('"', "&quot;");
    std::fs::write(
        &xml,
        format!(
            "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\" version=\"0.11\">\n\
             <page><title>Q42</title><ns>0</ns><id>138</id><revision><id>900</id>\
             <timestamp>2026-12-05T10:00:00Z</timestamp><contributor><username>u</username><id>1</id></contributor>\
             <text bytes=\"{}\" xml:space=\"preserve\">{escaped}</text><sha1>x</sha1>\
             <model>wikibase-item</model><format>application/json</format></revision></page>\n</mediawiki>\n",
            entity.len()
        ),
    )
    .unwrap();
    let json = tmp.path().join("wikidata-20261205-all.json");
    std::fs::write(&json, format!("[\n{entity}\n]\n")).unwrap();
    let from_page = read_with(Format::MediaWiki, all_namespaces(), &xml);
    let from_dump = crate::common::read(Format::Wikidata, &json);
    let rows = |s: &distillery_core::VecSink| {
        s.edges()
            .iter()
            .map(|t| {
                (
                    t.subject.clone(),
                    t.predicate.clone(),
                    t.object.clone(),
                    t.object_kind.clone(),
                    t.lang.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(rows(&from_page).len(), 2, "{:?}", from_page.quarantine());
    assert_eq!(rows(&from_page), rows(&from_dump));
    let ents = |s: &distillery_core::VecSink| {
        s.entities()
            .iter()
            .map(|e| (e.key.clone(), e.label.clone(), e.wikipedia.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(ents(&from_page), ents(&from_dump));
}

#[test]
fn a_stub_history_export_gives_every_pages_newest_revision() {
    let Some(p) = shared("wikimedia-incr/elwikivoyage-stub-meta-history.sample.xml.gz") else {
        return;
    };
    let mut xml = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&p).unwrap())
        .read_to_string(&mut xml)
        .unwrap();
    let expected = newest_by_scan(&xml);
    assert_eq!(expected.len(), 20);
    let sink = read_with(Format::MediaWiki, all_namespaces(), &p);
    let mut seen = BTreeMap::new();
    for d in sink.documents() {
        let id = d.page_id.unwrap();
        let (rev, sha1, model) = &expected[&id];
        assert_eq!(d.revision_id, Some(*rev), "page {id}");
        assert_eq!(d.sha1.as_deref(), Some(sha1.as_str()), "page {id}");
        assert!(
            model.is_empty() || model == "wikitext",
            "page {id}: {model}"
        );
        seen.insert(id, "document");
    }
    for q in sink.quarantine() {
        assert_eq!(q.reason, "unsupported_model", "{}", q.detail);
        let (&id, (rev, _, model)) = expected
            .iter()
            .find(|(_, (rev, _, _))| q.detail.contains(&format!("revision {rev})")))
            .unwrap_or_else(|| panic!("no page for {}", q.detail));
        assert!(
            q.detail.contains(&format!("`{model}`")),
            "{} {rev}",
            q.detail
        );
        seen.insert(id, "quarantined");
    }
    // Every page is accounted for, once.
    assert_eq!(seen.len(), 20, "{seen:?}");
    let redirects = sink
        .documents()
        .iter()
        .filter(|d| d.redirect.is_some())
        .count();
    assert_eq!(redirects, 13);
}

/// With `entity_documents`, a Wikidata page is also a document of its entity JSON with the
/// page's identity, and a merged item (a redirect's `{"entity","redirect"}` JSON) is a
/// redirect document with no KG rows, not bad data; without the option it gives nothing.
#[test]
fn entity_documents_and_merged_items() {
    let item = r#"{"type":"item","id":"Q7","labels":{"en":{"language":"en","value":"Seven"}},"descriptions":{},"aliases":{},"claims":{"P31":[{"mainsnak":{"snaktype":"value","property":"P31","datavalue":{"value":{"entity-type":"item","numeric-id":5,"id":"Q5"},"type":"wikibase-entityid"}},"type":"statement","rank":"normal"}]},"sitelinks":{}}"#;
    let merged = r#"{"entity":"Q8","redirect":"Q7"}"#;
    let page = |title: &str, id: i64, rev: i64, json: &str| {
        format!(
            "<page><title>{title}</title><ns>0</ns><id>{id}</id><revision><id>{rev}</id>\
             <timestamp>2026-12-05T10:00:00Z</timestamp><contributor><username>u</username><id>1</id></contributor>\
             <model>wikibase-item</model><format>application/json</format>\
             <text bytes=\"{}\" xml:space=\"preserve\">{}</text><sha1>x{rev}</sha1></revision></page>\n",
            json.len(),
            json.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('"', "&quot;")
        )
    };
    let tmp = tempfile::tempdir().unwrap();
    let xml = tmp
        .path()
        .join("wikidatawiki-20261205-pages-meta-hist-incr.xml");
    std::fs::write(
        &xml,
        format!(
            "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\" version=\"0.11\">\n{}{}</mediawiki>\n",
            page("Q7", 107, 900, item),
            page("Q8", 108, 901, merged)
        ),
    )
    .unwrap();
    let opts = |entity_documents| {
        FormatOptions::MediaWiki(MediaWikiOptions {
            wiki: Some("wikidatawiki".into()),
            entity_documents,
            ..MediaWikiOptions::default()
        })
    };
    let with = read_with(Format::MediaWiki, opts(true), &xml);
    assert!(with.quarantine().is_empty(), "{:?}", with.quarantine());
    let docs = with.documents();
    assert_eq!(docs.len(), 2);
    assert_eq!(
        (
            docs[0].uri.as_str(),
            docs[0].page_id,
            docs[0].revision_id,
            docs[0].text.as_str()
        ),
        ("wikidatawiki:Q7", Some(107), Some(900), item)
    );
    assert_eq!(
        docs[0].dataset,
        distillery_ingest::mediawiki::ENTITY_DATASET
    );
    assert_eq!(docs[1].redirect.as_deref(), Some("Q7"));
    assert!(with.edges().iter().all(|t| t.subject == "Q7"));
    assert!(!with.edges().is_empty());

    let without = read_with(Format::MediaWiki, opts(false), &xml);
    assert!(without.documents().is_empty() && without.quarantine().is_empty());
    assert_eq!(without.edges().len(), with.edges().len());
}
