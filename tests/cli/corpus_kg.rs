//! A Wikidata corpus night by night: generated daily folders of `wikibase-item` pages (entity
//! JSON in `<text>`, today's layout) and logging dumps applied to a corpus root
//! (`entity_documents`), and a KG index fed by it. After the nights the KG equals the one a
//! full build of the last day's snapshot gives, edits, a merge and deletions included, though each
//! night parsed only the day's pages and carried the rest of the graph on; a repeat keeps the
//! index version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::{ok, run, stage, summary};

/// Each entity's newest revision: (revision id, timestamp, version of its content).
struct Graph {
    items: BTreeMap<i64, (i64, String, i64)>,
    next_rev: i64,
}

/// Item `q`'s JSON at version `v`; a negative `v` is a merge into item `-v` (a redirect).
fn entity(q: i64, v: i64) -> String {
    if v < 0 {
        return format!(r#"{{"entity":"Q{q}","redirect":"Q{}"}}"#, -v);
    }
    let item = |p: &str, id: i64| {
        format!(
            r#"{{"mainsnak":{{"snaktype":"value","property":"{p}","datavalue":{{"value":{{"entity-type":"item","numeric-id":{id},"id":"Q{id}"}},"type":"wikibase-entityid"}}}},"type":"statement","rank":"normal"}}"#
        )
    };
    format!(
        r#"{{"type":"item","id":"Q{q}","labels":{{"en":{{"language":"en","value":"Thing {q} v{v}"}}}},"descriptions":{{}},"aliases":{{"en":[{{"language":"en","value":"T{q}"}}]}},"claims":{{"P31":[{}],"P361":[{}]}},"sitelinks":{{}}}}"#,
        item("P31", 1000 + v % 3),
        item("P361", (q + v) % 9 + 1)
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An export of `pages` (page id = item number), model after the text as today's dumps.
fn export(pages: &[(i64, i64, String, i64)]) -> String {
    let mut s = String::from(
        "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\" version=\"0.11\">\n",
    );
    for (q, rev, ts, v) in pages {
        let e = entity(*q, *v);
        s += &format!(
            "<page><title>Q{q}</title><ns>0</ns><id>{}</id><revision><id>{rev}</id>\
             <timestamp>{ts}</timestamp><contributor><username>u</username><id>1</id></contributor>\
             <text bytes=\"{}\" xml:space=\"preserve\">{}</text><sha1>s{rev}</sha1>\
             <model>wikibase-item</model><format>application/json</format></revision></page>\n",
            q + 100,
            e.len(),
            esc(&e)
        );
    }
    s + "</mediawiki>\n"
}

impl Graph {
    fn new(n: i64) -> Graph {
        let items = (1..=n)
            .map(|q| (q, (q, "2026-11-30T01:00:00Z".to_string(), 0)))
            .collect();
        Graph {
            items,
            next_rev: n + 1,
        }
    }

    fn snapshot(&self) -> String {
        let pages: Vec<_> = (self.items.iter())
            .map(|(q, (r, ts, v))| (*q, *r, ts.clone(), *v))
            .collect();
        export(&pages)
    }

    /// A day: `edit` revised, one item added, `merged` (from, into) merged, `deleted` deleted
    /// by the day's log.
    fn day(
        &mut self,
        root: &Path,
        date: &str,
        edit: &[i64],
        merged: Option<(i64, i64)>,
        deleted: i64,
    ) -> PathBuf {
        let ts = format!("{}-{}-{}T12:00:00Z", &date[..4], &date[4..6], &date[6..]);
        let mut touched = Vec::new();
        if let Some((from, into)) = merged {
            let rev = self.next_rev;
            self.next_rev += 1;
            self.items.insert(from, (rev, ts.clone(), -into));
            touched.push((from, rev, ts.clone(), -into));
        }
        let added = self.items.keys().max().unwrap() + 1;
        for &q in edit.iter().chain([&added]) {
            let rev = self.next_rev;
            self.next_rev += 1;
            let v = self.items.get(&q).map_or(0, |x| x.2 + 1);
            self.items.insert(q, (rev, ts.clone(), v));
            touched.push((q, rev, ts.clone(), v));
        }
        self.items.remove(&deleted);
        let dir = root.join(format!("incr/wikidatawiki/{date}"));
        distillery_testkit::incr::daily_folder(
            &dir,
            "wikidatawiki",
            date,
            &export(&touched),
            self.next_rev - 1,
        );
        let log = root.join(format!("logs/wikidatawiki-{date}-pages-logging.xml"));
        crate::deletion_log(&log, deleted, date, &format!("Q{deleted}"));
        log
    }

    /// A day that only deletes `deleted` (an empty pages file, one log entry).
    fn deletion_day(&mut self, root: &Path, date: &str, deleted: i64) {
        self.next_rev += 1;
        self.items.remove(&deleted);
        let dir = root.join(format!("incr/wikidatawiki/{date}"));
        distillery_testkit::incr::daily_folder(
            &dir,
            "wikidatawiki",
            date,
            &export(&[]),
            self.next_rev - 1,
        );
        let log = root.join(format!("logs/wikidatawiki-{date}-pages-logging.xml"));
        crate::deletion_log(&log, deleted, date, &format!("Q{deleted}"));
    }
}

fn pipeline(t: &Path, name: &str, inputs: &str, root: &Path, index: &Path) -> String {
    let p = t.join(format!("{name}.toml"));
    std::fs::write(
        &p,
        format!(
            "version = 1\nname = \"{name}\"\noutput = \"{}\"\n{inputs}\n\
             [[stages]]\nkind = \"corpus\"\noptions = {{ root = \"{}\" }}\n\
             [[stages]]\nkind = \"index\"\n\
             options = {{ kinds = [\"kg\"], root = \"{}\", corpus = \"{}\", incremental = true }}\n",
            t.join(format!("out-{name}")).display(),
            root.display(),
            index.display(),
            root.display(),
        ),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

fn wiki_input(paths: &str) -> String {
    format!(
        "[[inputs]]\nname = \"wd\"\nformat = \"mediawiki\"\npaths = [{paths}]\n\
         options = {{ namespaces = [0], wiki = \"wikidatawiki\", entity_documents = true }}\n"
    )
}

/// The current KG of an index root, as its GraphML export.
fn graphml(index: &Path) -> String {
    let v = std::fs::read_to_string(index.join("CURRENT")).unwrap();
    let dir = index.join("versions").join(v.trim());
    let found: Vec<PathBuf> = crate::walk(&dir)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "graph.graphml"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    std::fs::read_to_string(&found[0]).unwrap()
}

#[test]
fn a_kg_fed_by_a_wikidata_corpus_equals_a_full_build_after_nights() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mut g = Graph::new(12);
    std::fs::write(
        t.join("wikidatawiki-20261130-pages-articles.xml"),
        g.snapshot(),
    )
    .unwrap();
    let (root, index) = (t.join("corpus"), t.join("index"));
    let base = pipeline(
        t,
        "base",
        &wiki_input(&format!(
            "\"{}\"",
            t.join("wikidatawiki-20261130-pages-articles.xml").display()
        )),
        &root,
        &index,
    );
    ok(&["run", &base]);
    assert!(graphml(&index).contains("Thing 5 v0"));

    let days = format!("\"{}/incr/wikidatawiki/*\"", t.display());
    let logs = format!(
        "[[inputs]]\nname = \"log\"\nformat = \"mediawiki-log\"\npaths = [\"{}/logs/*.xml\"]\n",
        t.display()
    );
    let nightly = pipeline(t, "nightly", &(wiki_input(&days) + &logs), &root, &index);
    g.day(t, "20261201", &[1, 2], None, 5);
    ok(&["run", &nightly]);
    // The night carried the KG on: the unchanged items' edges from the previous version, only
    // the day's pages parsed.
    let s = summary(&t.join("out-nightly"));
    let ix = &stage(&s, "index")["counters"];
    assert!(ix["kg.edges.carried"].as_u64().unwrap_or(0) > 0, "{ix}");
    assert_eq!(
        stage(&s, "index")["records_in"],
        3,
        "two edits and one new item: {s}"
    );
    let after = graphml(&index);
    assert!(after.contains("Thing 1 v1") && !after.contains("Thing 1 v0"));
    assert!(
        !after.contains("Thing 5 v0"),
        "a deleted item keeps no name"
    );
    g.day(t, "20261202", &[2, 7], Some((3, 4)), 9);
    ok(&["run", &nightly]);
    assert!(
        !graphml(&index).contains("Thing 3 v0"),
        "a merged item keeps no name"
    );
    let s = summary(&t.join("out-nightly"));
    assert_eq!(stage(&s, "corpus")["counters"]["days.applied"], 1, "{s}");
    // A day that only deletes an item: the KG knows its wikis, so the deleted page is an
    // entity of it and the graph is still carried on, with no page parsed.
    g.deletion_day(t, "20261203", 10);
    ok(&["run", &nightly]);
    let s = summary(&t.join("out-nightly"));
    let ix = stage(&s, "index");
    assert!(
        ix["counters"]["kg.edges.carried"].as_u64().unwrap_or(0) > 0,
        "{ix}"
    );
    assert_eq!(ix["records_in"], 0, "{ix}");
    assert!(!graphml(&index).contains("Thing 10 v0"));

    // The same days again: no new version of either root.
    let v = std::fs::read_to_string(index.join("CURRENT")).unwrap();
    ok(&["run", &nightly]);
    assert_eq!(std::fs::read_to_string(index.join("CURRENT")).unwrap(), v);

    // The full build of the last day's snapshot.
    std::fs::write(
        t.join("wikidatawiki-20261202-pages-articles.xml"),
        g.snapshot(),
    )
    .unwrap();
    let (froot, findex) = (t.join("full-corpus"), t.join("full-index"));
    let full = pipeline(
        t,
        "full",
        &wiki_input(&format!(
            "\"{}\"",
            t.join("wikidatawiki-20261202-pages-articles.xml").display()
        )),
        &froot,
        &findex,
    );
    ok(&["run", &full]);
    let (nightly_kg, full_kg) = (graphml(&index), graphml(&findex));
    assert!(nightly_kg.contains("Thing 2 v2") && nightly_kg.contains("Thing 13 v0"));
    assert_eq!(
        nightly_kg, full_kg,
        "the nights' KG differs from a full build's"
    );

    // An index fed by a corpus refuses `same_as` (one wiki's graph).
    let o = run(&[
        "validate",
        &nightly,
        "--set",
        "stages.index.options.same_as=[\"P646\"]",
    ]);
    assert!(!o.status.success());
}
