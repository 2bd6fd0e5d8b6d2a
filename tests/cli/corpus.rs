//! A corpus root advanced night by night from generated daily folders in Wikimedia's layout
//! (history pages with several revisions, bz2, md5sums, `maxrevid.txt`, `status.txt`) and
//! logging dumps: equal to a full build of the last day's snapshot, repeats and empty nights
//! publish nothing, gaps are refused naming the missing day, and `distillery changes` lists
//! what moved, changed, appeared and went.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::{ok, run, stage, summary};

/// A page's state: title, then its revisions (id, timestamp, text).
#[derive(Clone)]
struct Page {
    title: String,
    revs: Vec<(i64, String, String)>,
}

fn stamp(date: &str, sec: u32) -> String {
    format!(
        "{}-{}-{}T{:02}:{:02}:{:02}Z",
        &date[..4],
        &date[4..6],
        &date[6..],
        sec / 3600,
        sec / 60 % 60,
        sec % 60
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn xml(pages: &BTreeMap<i64, Page>) -> String {
    let mut s = String::from(
        "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\" version=\"0.11\" xml:lang=\"en\">\n\
         <siteinfo><sitename>Wikipedia</sitename><dbname>enwiki</dbname>\
         <namespaces><namespace key=\"0\" case=\"first-letter\" /></namespaces></siteinfo>\n",
    );
    for (id, p) in pages {
        s += &format!(
            "<page><title>{}</title><ns>0</ns><id>{id}</id>\n",
            esc(&p.title)
        );
        for (rev, ts, text) in &p.revs {
            s += &format!(
                "<revision><id>{rev}</id><timestamp>{ts}</timestamp><contributor><username>u</username><id>1</id></contributor>\
                 <model>wikitext</model><format>text/x-wiki</format><text bytes=\"{}\" xml:space=\"preserve\">{}</text>\
                 <sha1>s{rev}</sha1></revision>\n",
                text.len(),
                esc(text)
            );
        }
        s += "</page>\n";
    }
    s + "</mediawiki>\n"
}

fn text(title: &str, version: i64) -> String {
    format!(
        "'''{title}''' is a place described in revision {version}.\n\n\
         == History ==\n{title} grew around a river crossing; edition {version} says so.\n\n\
         {{| class=\"wikitable\"\n! Year !! Event\n|-\n| {version} || {title} rebuilt\n|}}\n"
    )
}

/// A generated wiki: its pages now, and the revision counter.
struct Wiki {
    pages: BTreeMap<i64, Page>,
    next_rev: i64,
    next_page: i64,
}

impl Wiki {
    fn new(n: i64) -> Wiki {
        let mut w = Wiki {
            pages: BTreeMap::new(),
            next_rev: 1,
            next_page: n + 1,
        };
        for id in 1..=n {
            let title = format!("Place {id}");
            let rev = w.rev();
            w.pages.insert(
                id,
                Page {
                    revs: vec![(rev, stamp("20261130", 60), text(&title, rev))],
                    title,
                },
            );
        }
        w
    }

    fn rev(&mut self) -> i64 {
        self.next_rev += 1;
        self.next_rev - 1
    }

    /// The snapshot of every page's newest revision.
    fn snapshot(&self) -> String {
        let newest: BTreeMap<i64, Page> = self
            .pages
            .iter()
            .map(|(id, p)| {
                let mut p = p.clone();
                p.revs = vec![p.revs.last().unwrap().clone()];
                (*id, p)
            })
            .collect();
        xml(&newest)
    }
}

/// One day of changes to `w`: pages `edit` revised twice, `moved` renamed (its old title a
/// new redirect page), one page added, `deleted` deleted through the day's logging dump.
/// Writes the day's folder and log; returns the log's path.
fn day(root: &Path, w: &mut Wiki, date: &str, edit: &[i64], moved: i64, deleted: i64) -> PathBuf {
    let mut touched: BTreeMap<i64, Page> = BTreeMap::new();
    let mut sec = 100;
    for &id in edit {
        for _ in 0..2 {
            let rev = w.rev();
            sec += 1;
            let p = w.pages.get_mut(&id).unwrap();
            p.revs = vec![(rev, stamp(date, sec), text(&p.title, rev))];
            touched
                .entry(id)
                .or_insert_with(|| Page {
                    title: p.title.clone(),
                    revs: vec![],
                })
                .revs
                .push((rev, stamp(date, sec), text(&p.title, rev)));
        }
    }
    // A move: the page keeps its id and gets a null revision under its new title.
    let old = w.pages[&moved].title.clone();
    let new_title = format!("{old} (town)");
    let rev = w.rev();
    sec += 1;
    let body = w.pages[&moved].revs.last().unwrap().2.clone();
    w.pages.insert(
        moved,
        Page {
            title: new_title.clone(),
            revs: vec![(rev, stamp(date, sec), body.clone())],
        },
    );
    touched.insert(
        moved,
        Page {
            title: new_title.clone(),
            revs: vec![(rev, stamp(date, sec), body)],
        },
    );
    let redirect = w.next_page;
    w.next_page += 1;
    let rev = w.rev();
    let rtext = format!("#REDIRECT [[{new_title}]]");
    w.pages.insert(
        redirect,
        Page {
            title: old,
            revs: vec![(rev, stamp(date, sec), rtext.clone())],
        },
    );
    touched.insert(
        redirect,
        Page {
            title: w.pages[&redirect].title.clone(),
            revs: vec![(rev, stamp(date, sec), rtext)],
        },
    );
    let added = w.next_page;
    w.next_page += 1;
    let title = format!("New place {added}");
    let rev = w.rev();
    let t = text(&title, rev);
    w.pages.insert(
        added,
        Page {
            title: title.clone(),
            revs: vec![(rev, stamp(date, sec), t.clone())],
        },
    );
    touched.insert(
        added,
        Page {
            title,
            revs: vec![(rev, stamp(date, sec), t)],
        },
    );
    // The deletion happens after the day's edits.
    let gone = w.pages.remove(&deleted).unwrap();
    touched.remove(&deleted);
    let dir = root.join(format!("incr/enwiki/{date}"));
    distillery_testkit::incr::daily_folder(&dir, "enwiki", date, &xml(&touched), w.next_rev - 1);
    let log = root.join(format!("logs/enwiki-{date}-pages-logging.xml"));
    crate::deletion_log(&log, deleted, date, &gone.title);
    log
}

/// A pipeline applying `inputs` to the corpus `root`, then indexing it (BM25, 2 shards) into
/// `<root>-index`, incrementally or in full.
fn pipeline(tmp: &Path, name: &str, inputs: &str, root: &Path) -> String {
    let p = tmp.join(format!("{name}.toml"));
    std::fs::write(
        &p,
        format!(
            "version = 1\nname = \"{name}\"\noutput = \"{}\"\n{inputs}\n\
             [[stages]]\nkind = \"corpus\"\noptions = {{ root = \"{}\" }}\n\
             [[stages]]\nkind = \"index\"\n\
             options = {{ root = \"{}-index\", corpus = \"{}\", incremental = {}, shards = 2 }}\n",
            tmp.join(format!("out-{name}")).display(),
            root.display(),
            root.display(),
            root.display(),
            name != "full"
        ),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

/// The top 10 of a BM25 query: (passage id, score to 4 places).
fn top10(index: &Path, query: &str) -> Vec<(String, String)> {
    ok(&["search", index.to_str().unwrap(), query, "--format", "json"])
        .lines()
        .map(|l| {
            let h: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                h["id"].as_str().unwrap().to_string(),
                format!("{:.4}", h["score"].as_f64().unwrap()),
            )
        })
        .collect()
}

fn index_of(root: &Path) -> PathBuf {
    PathBuf::from(format!("{}-index", root.display()))
}

fn wiki_input(paths: &str) -> String {
    format!(
        "[[inputs]]\nname = \"wiki\"\nformat = \"mediawiki\"\npaths = [{paths}]\n\
         options = {{ namespaces = [0], redirects = true }}\n"
    )
}

/// Runs a pipeline into a fresh output directory.
fn night(p: &str, out: &Path) -> std::process::Output {
    run(&["run", p, "--set", &format!("output={}", out.display())])
}

/// The live documents of a corpus root, by page key, without the fields that name the file
/// a row was read from (its id and source).
fn view(root: &Path) -> BTreeMap<String, serde_json::Value> {
    ok(&["corpus", "cat", root.to_str().unwrap()])
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let key = format!(
                "{}#{}",
                v["uri"].as_str().unwrap().split(':').next().unwrap(),
                v["page_id"]
            );
            let o = v.as_object_mut().unwrap();
            o.remove("id");
            o.remove("source");
            (key, v)
        })
        .collect()
}

fn versions(root: &Path) -> Vec<serde_json::Value> {
    let s = ok(&["corpus", "list", root.to_str().unwrap(), "--format", "json"]);
    serde_json::from_str(&s).unwrap()
}

#[test]
fn nights_of_daily_folders_equal_a_full_build_of_the_last_day() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mut w = Wiki::new(40);
    std::fs::write(t.join("enwiki-20261130-pages-articles.xml"), w.snapshot()).unwrap();
    let root = t.join("corpus");
    let base = pipeline(
        t,
        "base",
        &wiki_input(&format!(
            "\"{}\"",
            t.join("enwiki-20261130-pages-articles.xml").display()
        )),
        &root,
    );
    assert!(night(&base, &t.join("o0")).status.success());
    let base_version = versions(&root)[0]["version"].as_str().unwrap().to_string();
    assert_eq!(view(&root).len(), 40);

    let days = format!("\"{}/incr/enwiki/*\"", t.display());
    let logs = format!(
        "[[inputs]]\nname = \"log\"\nformat = \"mediawiki-log\"\npaths = [\"{}/logs/*.xml\"]\n",
        t.display()
    );
    let nightly = pipeline(t, "nightly", &(wiki_input(&days) + &logs), &root);
    day(t, &mut w, "20261201", &[1, 2, 3], 4, 5);
    assert!(night(&nightly, &t.join("o1")).status.success());
    // Two days at once (a catch-up), each a page moved, pages revised twice, one deleted.
    day(t, &mut w, "20261202", &[1, 6], 7, 8);
    day(t, &mut w, "20261203", &[9, 2], 1, 10);
    assert!(night(&nightly, &t.join("o2")).status.success());
    assert_eq!(versions(&root).len(), 3);
    // The night read only the pages the two days touched, not the corpus.
    let s = summary(&t.join("o2"));
    let (c, i) = (stage(&s, "corpus"), stage(&s, "index"));
    assert_eq!(c["counters"]["days.applied"], 2, "{c}");
    assert_eq!(c["counters"]["pages.moved"], 2, "{c}");
    let read = i["records_in"].as_u64().unwrap();
    assert!(
        (1..=12).contains(&read),
        "documents read by the index: {read}"
    );

    // The full build of the last day's snapshot, into another root.
    std::fs::write(t.join("enwiki-20261203-pages-articles.xml"), w.snapshot()).unwrap();
    let full_root = t.join("full");
    let full = pipeline(
        t,
        "full",
        &wiki_input(&format!(
            "\"{}\"",
            t.join("enwiki-20261203-pages-articles.xml").display()
        )),
        &full_root,
    );
    assert!(night(&full, &t.join("o3")).status.success());
    let (nightly_view, full_view) = (view(&root), view(&full_root));
    assert_eq!(nightly_view.len(), w.pages.len());
    let differ: Vec<&String> = nightly_view
        .keys()
        .chain(full_view.keys())
        .filter(|k| nightly_view.get(*k) != full_view.get(*k))
        .collect();
    assert!(
        differ.is_empty(),
        "the nights differ from a full build at {differ:?}: {:?} vs {:?}",
        differ.first().and_then(|k| nightly_view.get(*k)),
        differ.first().and_then(|k| full_view.get(*k))
    );

    // The index followed the corpus night by night: the same passages and the same top 10 as
    // the index built in full from the last day's snapshot.
    let count = |r: &Path| {
        let s = ok(&[
            "index",
            "list",
            index_of(r).to_str().unwrap(),
            "--format",
            "json",
        ]);
        let v: Vec<serde_json::Value> = serde_json::from_str(&s).unwrap();
        let cur = v.iter().find(|x| x["current"] == true).unwrap().clone();
        cur["manifest"].clone()
    };
    let (ni, fi) = (count(&root), count(&full_root));
    assert_eq!(ni["passages"], fi["passages"]);
    assert!(ni["changes"]["unchanged"].as_u64().unwrap() > 0, "{ni}");
    for q in [
        "river crossing",
        "Place 7 town",
        "New place",
        "revision 51",
        "Place 2 edition",
    ] {
        let (a, b) = (top10(&index_of(&root), q), top10(&index_of(&full_root), q));
        assert!(!a.is_empty());
        assert_eq!(a, b, "top 10 of `{q}`");
    }
    // An index entry names the page and revision its passage was cut from.
    let hits = ok(&[
        "search",
        index_of(&root).to_str().unwrap(),
        "river crossing",
        "--format",
        "json",
    ]);
    for l in hits.lines() {
        let h: serde_json::Value = serde_json::from_str(l).unwrap();
        let page = h["page_id"].as_i64().unwrap();
        let now = w.pages[&page].revs.last().unwrap().0;
        assert_eq!(h["revision_id"].as_i64(), Some(now), "{h}");
    }

    // The same days again: nothing new is published.
    let out = night(&nightly, &t.join("o4"));
    assert!(out.status.success());
    assert_eq!(versions(&root).len(), 3, "a repeat publishes nothing");
    let again = summary(&t.join("o4"));
    assert_eq!(
        stage(&again, "corpus")["records_in"],
        0,
        "days applied before are left out of the plan, not parsed again"
    );
    assert_eq!(
        count(&root)["version"],
        ni["version"],
        "nor a new index version"
    );

    // What changed since the base, page by page.
    let s = ok(&[
        "changes",
        root.to_str().unwrap(),
        "--since",
        &base_version,
        "--format",
        "json",
    ]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&s).unwrap();
    let kind = |title: &str| {
        rows.iter()
            .find(|r| r["title"] == title)
            .map(|r| r["kind"].as_str().unwrap().to_string())
    };
    assert_eq!(kind("Place 4 (town)").as_deref(), Some("moved"));
    assert_eq!(
        kind("Place 4").as_deref(),
        Some("added"),
        "the old title is a new redirect page"
    );
    assert_eq!(kind("Place 2").as_deref(), Some("changed"));
    assert_eq!(kind("Place 3").as_deref(), Some("changed"));
    assert_eq!(kind("Place 1 (town)").as_deref(), Some("moved"));
    let mut deleted: Vec<&str> = rows
        .iter()
        .filter(|r| r["kind"] == "deleted")
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    deleted.sort();
    assert_eq!(deleted, vec!["Place 10", "Place 5", "Place 8"]);
    assert_eq!(
        rows.iter().filter(|r| r["kind"] == "added").count(),
        6,
        "{rows:?}"
    );

    // A gap: 20261205 without 20261204 is refused naming the missing day.
    day(t, &mut w, "20261205", &[11], 12, 13);
    let out = night(&nightly, &t.join("o5"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("20261204 is missing"), "{err}");
    assert_eq!(
        versions(&root).len(),
        3,
        "a refused night leaves the corpus as it was"
    );
    let out = run(&[
        "run",
        &nightly,
        "--set",
        &format!("output={}", t.join("o6").display()),
        "--set",
        "stages.corpus.options.allow_gaps=true",
    ]);
    assert!(out.status.success());
    assert_eq!(view(&root).len(), w.pages.len());

    // A rollback points CURRENT back; a snapshot on a corpus with a base is refused.
    ok(&["corpus", "rollback", root.to_str().unwrap(), &base_version]);
    assert_eq!(view(&root).len(), 40);
    assert!(!night(&base, &t.join("o7")).status.success());
    // A rebase replaces it: a new base, numbered after the nights, which is CURRENT.
    let out = run(&[
        "run",
        &base,
        "--set",
        &format!("output={}", t.join("o8").display()),
        "--set",
        "stages.corpus.options.rebase=true",
    ]);
    assert!(out.status.success());
    let v = versions(&root);
    assert_eq!(v.last().unwrap()["current"], true, "{v:?}");
    assert_eq!(view(&root).len(), 40);
}

/// `pipelines/nightly.toml` as shipped, its output and roots in a temporary directory and the
/// CI MiniLM directory for the hub id: the base embeds every passage; a night from a daily
/// folder and its logging dump embeds only the passages of the pages the day touched; the same
/// night again reads nothing and publishes nothing. The cluster copy
/// (`k8s/base/pipelines/nightly.toml`) validates with the paths the CronJob sets.
#[test]
fn the_shipped_nightly_pipeline_runs_a_base_then_nights() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mut w = Wiki::new(30);
    let snapshot = t.join("enwiki-20261130-pages-articles.xml");
    std::fs::write(&snapshot, w.snapshot()).unwrap();
    let log = day(t, &mut w, "20261201", &[1, 2], 3, 4);
    let folder = t.join("incr/enwiki/20261201");
    let wiki = |p: &Path| format!("inputs.wiki.paths=[\"{}\"]", p.display());
    let logs = format!("inputs.log.paths=[\"{}\"]", log.display());
    let out = |n: &str| format!("output={}", t.join(n).display());
    ok(&[
        "validate",
        "k8s/base/pipelines/nightly.toml",
        "--set",
        &wiki(&folder),
        "--set",
        &logs,
        "--set",
        &out("k8s"),
    ]);
    let Some(model) = crate::embed_model("the shipped nightly pipeline") else {
        return;
    };
    let (corpus, index) = (t.join("corpus"), t.join("index"));
    let roots = [
        format!("stages.corpus.options.root={}", corpus.display()),
        format!("stages.index.options.root={}", index.display()),
        format!("stages.index.options.corpus={}", corpus.display()),
        format!("stages.index.options.embedding.model={model}"),
    ];
    let go = |sets: &[String]| {
        let mut args = vec!["run".to_string(), "pipelines/nightly.toml".to_string()];
        for s in roots.iter().chain(sets) {
            args.extend(["--set".to_string(), s.clone()]);
        }
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    };
    let counter = |run: &str, st: &str, k: &str| {
        stage(&summary(&t.join(run)), st)["counters"][k]
            .as_u64()
            .unwrap_or(0)
    };
    go(&[out("base"), wiki(&snapshot)]);
    let passages = counter("base", "index", "passages");
    assert!(passages > 0);
    assert_eq!(counter("base", "index", "embeddings.computed"), passages);

    go(&[out("night"), wiki(&folder), logs.clone()]);
    assert_eq!(counter("night", "corpus", "pages.changed"), 2);
    assert_eq!(counter("night", "corpus", "pages.deleted"), 1);
    let embedded = counter("night", "index", "embeddings.computed");
    assert!(
        embedded > 0 && embedded * 4 < passages,
        "a night touching 4 of 30 pages embedded {embedded} of {passages} passages"
    );
    let current = std::fs::read_to_string(index.join("CURRENT")).unwrap();

    go(&[out("again"), wiki(&folder), logs]);
    let again = summary(&t.join("again"));
    assert_eq!(stage(&again, "corpus")["records_in"], 0, "{again}");
    assert_eq!(counter("again", "index", "embeddings.computed"), 0);
    assert_eq!(
        std::fs::read_to_string(index.join("CURRENT")).unwrap(),
        current
    );
    let hits = ok(&[
        "search",
        index.to_str().unwrap(),
        "river crossing",
        "--kind",
        "hybrid",
        "--format",
        "json",
    ]);
    assert!(!hits.trim().is_empty());
}

/// SFT samples made from a corpus-fed index (`cirag` retrieving from it, a stand-in teacher
/// on loopback) cite their evidence by page URI; after a night that revises, moves and deletes
/// cited pages, `distillery changes --sft` lists exactly the samples citing one of them.
#[test]
fn changes_lists_the_sft_samples_whose_evidence_changed() {
    use distillery_testkit::fault_server::FaultServer;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(
        vec![],
        crate::cirag::cirag_teacher(),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mut w = Wiki::new(30);
    // Pages the quick-start questions find: each names the people and films of one question.
    let hotpot: serde_json::Value = serde_json::from_slice(
        &std::fs::read(crate::repo().join("data/quickstart/hotpot.json")).unwrap(),
    )
    .unwrap();
    for (k, q) in hotpot.as_array().unwrap().iter().enumerate() {
        let p = w.pages.get_mut(&(k as i64 + 1)).unwrap();
        let about = q["question"].as_str().unwrap().trim_end_matches('?');
        p.revs[0].2 = format!("'''{}''' is where this happened: {about}.\n", p.title);
    }
    let snapshot = t.join("enwiki-20261130-pages-articles.xml");
    std::fs::write(&snapshot, w.snapshot()).unwrap();
    let root = t.join("corpus");
    let base = pipeline(
        t,
        "base",
        &wiki_input(&format!("\"{}\"", snapshot.display())),
        &root,
    );
    assert!(night(&base, &t.join("o0")).status.success());
    let since = versions(&root)[0]["version"].as_str().unwrap().to_string();

    let sft = t.join("sft");
    let file = t.join("cirag.toml");
    std::fs::write(
        &file,
        format!(
            "version = 1\nname = \"cirag-corpus\"\noutput = \"{}\"\n\
             [[inputs]]\nname = \"hotpot\"\nformat = \"hotpotqa\"\npaths = [\"{}\"]\n\
             [[stages]]\nkind = \"cirag\"\noptions = {{ index = \"{}\", top_k = 3, candidates = 5, \
             max_steps = 3, validation_share = 0.3 }}\n\
             [llm]\nbase_url = \"{}\"\nmodel = \"stand-in\"\ncache = \"{}\"\n",
            sft.display(),
            crate::repo().join("data/quickstart/hotpot.json").display(),
            index_of(&root).display(),
            server.url,
            t.join("cache").display()
        ),
    )
    .unwrap();
    let o = crate::triples::run_file(&file, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The samples and the pages they cite, as the training files hold them.
    let mut samples: Vec<(String, Vec<String>)> = Vec::new();
    for f in ["train.jsonl", "validation.jsonl"] {
        let Ok(text) = std::fs::read_to_string(sft.join("cirag").join(f)) else {
            continue;
        };
        for l in text.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let segs = v["segment_ids"].as_array().unwrap();
            // Each evidence names the page revision the index held: `enwiki#N@rev`.
            let revs = v["revisions"].as_array().unwrap();
            assert_eq!(revs.len(), segs.len(), "{v}");
            for (seg, rev) in segs.iter().zip(revs) {
                let n: i64 = seg
                    .as_str()
                    .and_then(|s| s.strip_prefix("enwiki:Place "))
                    .and_then(|n| n.parse().ok())
                    .unwrap();
                let now = w.pages[&n].revs.last().unwrap().0;
                assert_eq!(rev.as_str().unwrap(), format!("enwiki#{n}@{now}"));
            }
            samples.push((
                v["id"].as_str().unwrap().to_string(),
                segs.iter()
                    .map(|s| s.as_str().unwrap().to_string())
                    .collect(),
            ));
        }
    }
    let mut cited: Vec<i64> = samples
        .iter()
        .flat_map(|(_, s)| s.iter())
        .filter_map(|s| s.strip_prefix("enwiki:Place ")?.parse().ok())
        .collect();
    cited.sort();
    cited.dedup();
    assert!(
        cited.len() >= 3,
        "the samples cite too few pages: {cited:?}"
    );
    // A night revising one cited page, moving another and deleting a third.
    let (edit, moved, deleted) = (cited[0], cited[1], cited[2]);
    day(t, &mut w, "20261201", &[edit], moved, deleted);
    let days = format!("\"{}/incr/enwiki/*\"", t.display());
    let logs = format!(
        "[[inputs]]\nname = \"log\"\nformat = \"mediawiki-log\"\npaths = [\"{}/logs/*.xml\"]\n",
        t.display()
    );
    let nightly = pipeline(t, "nightly", &(wiki_input(&days) + &logs), &root);
    assert!(night(&nightly, &t.join("o1")).status.success());

    let touched: Vec<String> = [edit, moved, deleted]
        .iter()
        .map(|i| format!("enwiki:Place {i}"))
        .collect();
    let mut want: Vec<&str> = samples
        .iter()
        .filter(|(_, s)| s.iter().any(|x| touched.contains(x)))
        .map(|(id, _)| id.as_str())
        .collect();
    want.sort();
    assert!(!want.is_empty() && want.len() < samples.len(), "{want:?}");
    let report: serde_json::Value = serde_json::from_str(&ok(&[
        "changes",
        root.to_str().unwrap(),
        "--since",
        &since,
        "--sft",
        sft.to_str().unwrap(),
        "--format",
        "json",
    ]))
    .unwrap();
    let listed = report["samples"].as_array().unwrap();
    let mut got: Vec<&str> = listed.iter().map(|s| s["id"].as_str().unwrap()).collect();
    got.sort();
    assert_eq!(got, want);
    let kinds: std::collections::BTreeSet<&str> = listed
        .iter()
        .flat_map(|s| s["evidence"].as_array().unwrap())
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains("changed") && kinds.contains("deleted"),
        "{kinds:?}"
    );
    // Matched by page id: the revision cited, and the one the page has now (a deleted page's
    // is the one it had).
    for e in listed
        .iter()
        .flat_map(|s| s["evidence"].as_array().unwrap())
    {
        assert!(e["cited_revision"].is_i64(), "{e}");
        if e["kind"] != "deleted" {
            assert_ne!(e["cited_revision"], e["revision_id"], "{e}");
        }
    }
    assert!(report["pages"].as_array().unwrap().len() >= 3);
}

/// A corpus stage keeping segments (or not) and an index of unit `segment` fed by it.
fn seg_pipeline(tmp: &Path, name: &str, inputs: &str, root: &Path, segments: bool) -> String {
    let p = tmp.join(format!("{name}.toml"));
    let seg = if segments { ", segments = {}" } else { "" };
    std::fs::write(
        &p,
        format!(
            "version = 1\nname = \"{name}\"\noutput = \"{}\"\n{inputs}\n\
             [[stages]]\nkind = \"corpus\"\noptions = {{ root = \"{}\"{seg} }}\n\
             [[stages]]\nkind = \"index\"\n\
             options = {{ root = \"{}-index\", corpus = \"{}\", unit = \"segment\", \
             incremental = true, shards = 1 }}\n",
            tmp.join(format!("out-{name}")).display(),
            root.display(),
            root.display(),
            root.display(),
        ),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

/// The live segments of a corpus root by (uri, level, offsets, order), without the fields
/// derived from the document row's id, which names the file it was read from (`id`, `parent`,
/// `source_id`).
fn segments(root: &Path) -> BTreeMap<String, serde_json::Value> {
    ok(&["corpus", "cat", root.to_str().unwrap(), "--segments"])
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let key = format!("{} {} {} {}", v["uri"], v["level"], v["offsets"], v["ord"]);
            let o = v.as_object_mut().unwrap();
            for f in ["id", "parent", "source_id"] {
                o.remove(f);
            }
            (key, v)
        })
        .collect()
}

/// Every hit of a BM25 query by page and text, with its score to 4 places, sorted (segment
/// ids name the file their page was read from, so ties do not order alike in two builds).
fn hits_by_text(index: &Path, query: &str) -> Vec<(String, String, String)> {
    let mut v: Vec<(String, String, String)> = ok(&[
        "search",
        index.to_str().unwrap(),
        query,
        "--format",
        "json",
        "--k",
        "1000",
    ])
    .lines()
    .map(|l| {
        let h: serde_json::Value = serde_json::from_str(l).unwrap();
        (
            h["document_id"].as_str().unwrap().to_string(),
            h["text"].as_str().unwrap().to_string(),
            format!("{:.4}", h["score"].as_f64().unwrap()),
        )
    })
    .collect();
    v.sort();
    v
}

#[test]
fn a_corpus_keeps_segments_that_follow_the_nights_like_a_full_build() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mut w = Wiki::new(30);
    let snap = |t: &Path, w: &Wiki, date: &str| {
        let f = t.join(format!("enwiki-{date}-pages-articles.xml"));
        std::fs::write(&f, w.snapshot()).unwrap();
        wiki_input(&format!("\"{}\"", f.display()))
    };
    let root = t.join("corpus");
    let base = seg_pipeline(t, "base", &snap(t, &w, "20261130"), &root, true);
    let out = night(&base, &t.join("o0"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s0 = summary(&t.join("o0"));
    let c0 = &stage(&s0, "corpus")["counters"];
    let base_cut = c0["segments.written"].as_u64().unwrap();
    assert_eq!(c0["roundtrip.failed"], 0, "{s0}");
    let seg0 = segments(&root);
    assert_eq!(seg0.len() as u64, base_cut);
    // Every page's text and its table are cut, named by the page and its revision.
    let levels = |m: &BTreeMap<String, serde_json::Value>, l: &str| {
        m.values().filter(|v| v["level"] == l).count()
    };
    assert_eq!(levels(&seg0, "document"), 30);
    assert_eq!(levels(&seg0, "table"), 30);
    assert!(
        seg0.values()
            .all(|v| v["page_id"].is_i64() && v["source_version"].is_string())
    );

    let days = format!("\"{}/incr/enwiki/*\"", t.display());
    let logs = format!(
        "[[inputs]]\nname = \"log\"\nformat = \"mediawiki-log\"\npaths = [\"{}/logs/*.xml\"]\n",
        t.display()
    );
    let inputs = wiki_input(&days) + &logs;
    // A night whose corpus stage asks for no segments is refused: the corpus keeps them.
    let plain = seg_pipeline(t, "plain", &inputs, &root, false);
    day(t, &mut w, "20261201", &[1, 2, 3], 4, 5);
    let out = night(&plain, &t.join("o-plain"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("keeps segments"), "{err}");
    let nightly = seg_pipeline(t, "nightly", &inputs, &root, true);
    assert!(night(&nightly, &t.join("o1")).status.success());
    day(t, &mut w, "20261202", &[2, 6], 7, 8);
    assert!(night(&nightly, &t.join("o2")).status.success());
    // A night cuts only the pages it touched, not the corpus.
    let s2 = summary(&t.join("o2"));
    let cut = stage(&s2, "corpus")["counters"]["segments.written"]
        .as_u64()
        .unwrap();
    assert!(
        cut > 0 && cut * 4 < base_cut,
        "night cut {cut}, base {base_cut}"
    );

    // The full build of the last day's snapshot into another root.
    let full_root = t.join("full");
    let full = seg_pipeline(t, "full", &snap(t, &w, "20261202"), &full_root, true);
    assert!(night(&full, &t.join("o3")).status.success());
    let (a, b) = (segments(&root), segments(&full_root));
    let differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    assert!(
        differ.is_empty(),
        "{} segments differ from a full build, first {:?}: {:?} vs {:?}",
        differ.len(),
        differ.first(),
        differ.first().and_then(|k| a.get(*k)),
        differ.first().and_then(|k| b.get(*k))
    );
    // The index of segments followed them: every hit scores as in one built in full.
    for q in ["river crossing", "rebuilt", "Place 6", "New place", "Event"] {
        let (x, y) = (
            hits_by_text(&index_of(&root), q),
            hits_by_text(&index_of(&full_root), q),
        );
        assert!(!x.is_empty(), "no hit for `{q}`");
        assert_eq!(x, y, "hits of `{q}`");
    }
    let i2 = stage(&s2, "index");
    assert!(
        i2["counters"]["passages.unchanged"].as_u64().unwrap() > 0,
        "{i2}"
    );
}
