//! `mediawiki-log`: page deletions, restores and moves from Wikimedia's logging dumps, and
//! lists of deleted pages, as `changes` rows.

use distillery_core::spec::Format;

use crate::common::{read, shared};
use crate::ranges::write;

#[test]
fn the_shared_logging_dump_gives_its_deletion() {
    let Some(p) = shared("wikimedia-incr/enwiki-pages-logging.sample.xml") else {
        return;
    };
    let sink = read(Format::MediaWikiLog, &p);
    let changes = sink.changes();
    // A deletion and an upload: the upload is not a change to a page.
    assert_eq!(changes.len(), 1);
    let c = changes[0];
    assert_eq!(c.kind, "deleted");
    assert_eq!(c.title, "Vivian Blaine");
    assert_eq!(c.log_id, Some(1));
    assert_eq!(c.timestamp.as_deref(), Some("2004-12-23T03:20:32Z"));
    assert_eq!((c.page_id, c.target.as_deref()), (None, None));
    assert!(sink.quarantine().is_empty());
}

#[test]
fn a_bare_logitem_fragment_is_read_too() {
    let Some(p) = shared("wikimedia-incr/enwiki-pages-logging.logitem-fragment.xml") else {
        return;
    };
    let sink = read(Format::MediaWikiLog, &p);
    let titles: Vec<&str> = sink.changes().iter().map(|c| c.title.as_str()).collect();
    assert_eq!(titles, ["Template:UserBrockert"]);
}

#[test]
fn moves_restores_and_bad_items() {
    let dir = tempfile::tempdir().unwrap();
    let xml = r#"<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">
  <logitem><id>10</id><timestamp>2026-12-01T00:00:00Z</timestamp>
    <contributor><username>A</username><id>3</id></contributor>
    <type>move</type><action>move</action><logtitle>Old &amp; Name</logtitle>
    <params xml:space="preserve">a:2:{s:9:"4::target";s:10:"New &amp; Name";s:10:"5::noredir";s:1:"0";}</params>
  </logitem>
  <logitem><id>11</id><timestamp>2026-12-01T00:01:00Z</timestamp>
    <type>move</type><action>move_redir</action><logtitle>Legacy</logtitle>
    <params xml:space="preserve">Legacy title moved</params>
  </logitem>
  <logitem><id>12</id><type>delete</type><action>restore</action><logtitle>Back</logtitle><params/></logitem>
  <logitem><id>13</id><type>delete</type><action>delete</action><params/></logitem>
  <logitem><id>14</id><type>move</type><action>move</action><logtitle>Nowhere</logtitle><params/></logitem>
  <logitem><id>15</id><type>block</type><action>block</action><logtitle>User:X</logtitle></logitem>
</mediawiki>
"#;
    let sink = read(
        Format::MediaWikiLog,
        &write(dir.path(), "log.xml", xml.as_bytes()),
    );
    let got: Vec<(&str, &str, Option<&str>)> = sink
        .changes()
        .iter()
        .map(|c| (c.kind.as_str(), c.title.as_str(), c.target.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("moved", "Old & Name", Some("New & Name")),
            ("moved", "Legacy", Some("Legacy title moved")),
            ("restored", "Back", None),
        ]
    );
    let q = sink.quarantine();
    assert_eq!(q.len(), 2, "{q:?}");
    assert!(q.iter().all(|q| q.reason == "missing_field"));
    assert!(q[0].detail.contains("<logtitle>") && q[1].detail.contains("target"));
    // Ids are stable and distinct.
    let again = read(Format::MediaWikiLog, &dir.path().join("log.xml"));
    let ids = |s: &distillery_core::VecSink| -> Vec<String> {
        s.changes().iter().map(|c| c.id.clone()).collect()
    };
    assert_eq!(ids(&sink), ids(&again));
    let mut distinct = ids(&sink);
    distinct.dedup();
    assert_eq!(distinct.len(), 3);
}

#[test]
fn a_list_of_deleted_pages() {
    let dir = tempfile::tempdir().unwrap();
    let list = "# pages removed by hand\n12345\nSome Title\n\n  Talk:Other page  # spam\n";
    let sink = read(
        Format::MediaWikiLog,
        &write(dir.path(), "deleted.txt", list.as_bytes()),
    );
    let got: Vec<(Option<i64>, &str)> = sink
        .changes()
        .iter()
        .map(|c| (c.page_id, c.title.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (Some(12345), ""),
            (None, "Some Title"),
            (None, "Talk:Other page")
        ]
    );
    assert!(sink.changes().iter().all(|c| c.kind == "deleted"));
}
