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
    assert_eq!(q[0].reason, "unsupported_model");
    assert!(q[0].detail.contains("wikibase-item"), "{}", q[0].detail);
    assert!(q[0].detail.contains("110669245"), "{}", q[0].detail);
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
