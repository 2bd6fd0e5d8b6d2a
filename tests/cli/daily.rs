//! Wikimedia's daily adds-changes folders and logging dumps, end to end: `validate` refuses a
//! day still being written, and a run reads a finished day (its pages' newest revisions) and
//! the log's changes into their tables.

use std::io::Write;
use std::path::Path;

use crate::{ok, run, shared, sql_json};

/// A daily folder holding the shared adds-changes sample as its pages file, with its md5
/// sums, `maxrevid.txt` and a `status.txt` of `status`.
fn day(root: &Path, sample: &Path, status: &str) -> std::path::PathBuf {
    use md5::Digest;
    let dir = root.join("incr/wikidatawiki/20140220");
    std::fs::create_dir_all(&dir).unwrap();
    let name = "wikidatawiki-20140220-pages-meta-hist-incr.xml.bz2";
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    bz.write_all(&std::fs::read(sample).unwrap()).unwrap();
    let data = bz.finish().unwrap();
    let sum: String = md5::Md5::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(dir.join(name), &data).unwrap();
    std::fs::write(
        dir.join("wikidatawiki-20140220-md5sums.txt"),
        format!("{sum}  {name}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("maxrevid.txt"), "110689770").unwrap();
    std::fs::write(dir.join("status.txt"), status).unwrap();
    dir
}

#[test]
fn a_daily_folder_and_a_logging_dump_end_to_end() {
    let (Some(sample), Some(log)) = (
        shared("wikimedia-incr/wikidatawiki-20140220-pages-meta-hist-incr.sample.xml"),
        shared("wikimedia-incr/enwiki-pages-logging.sample.xml"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = day(tmp.path(), &sample, "in-progress");
    let out = tmp.path().join("out");
    let pipeline = tmp.path().join("nightly.toml");
    std::fs::write(
        &pipeline,
        format!(
            "version = 1\nname = \"daily\"\noutput = \"{}\"\n\
             [[inputs]]\nname = \"day\"\nformat = \"mediawiki\"\npaths = [\"{}/incr/wikidatawiki/2014*\"]\n\
             options = {{ namespaces = [] }}\n\
             [[inputs]]\nname = \"log\"\nformat = \"mediawiki-log\"\npaths = [\"{}\"]\n\
             [[stages]]\nkind = \"hseq\"\n\
             [[stages]]\nkind = \"corpus\"\noptions = {{ root = \"{}/corpus\" }}\n",
            out.display(),
            tmp.path().display(),
            log.display(),
            tmp.path().display()
        ),
    )
    .unwrap();
    let p = pipeline.to_str().unwrap();
    // A day still being written is refused before anything runs, naming it.
    let refused = run(&["validate", p]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("20140220") && err.contains("in-progress"),
        "{err}"
    );
    assert!(!run(&["run", p]).status.success());
    assert!(!out.exists(), "nothing written for a refused day");

    std::fs::write(dir.join("status.txt"), "done:all").unwrap();
    ok(&["validate", p]);
    ok(&["run", p, "--set", "run.max_bad_ratio=1"]);
    let o = out.as_path();
    let docs = sql_json(o, "SELECT title, revision_id, sha1 FROM documents");
    assert_eq!(docs.len(), 1, "{docs:?}");
    assert_eq!(docs[0]["revision_id"], 110689770);
    assert_eq!(docs[0]["sha1"], "ofkf3r8kinlbu9zvwk9m4r7g64o3gb5");
    let q = sql_json(o, "SELECT reason FROM quarantine");
    assert_eq!(q.len(), 1, "Q1's entity JSON: {q:?}");
    assert_eq!(q[0]["reason"], "old_entity_layout");
    let changes = sql_json(o, "SELECT kind, title, log_id FROM changes");
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0]["kind"], "deleted");
    assert_eq!(changes[0]["title"], "Vivian Blaine");
    ok(&["hseq", "verify", o.to_str().unwrap()]);

    // The day became the corpus's first version; the log's deletion names no page of it.
    let root = tmp.path().join("corpus");
    let list = |r: &Path| -> Vec<serde_json::Value> {
        serde_json::from_str(&ok(&[
            "corpus",
            "list",
            r.to_str().unwrap(),
            "--format",
            "json",
        ]))
        .unwrap()
    };
    let v = list(&root);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["manifest"]["pages"], 1);
    assert_eq!(v[0]["manifest"]["days"][0]["date"], "20140220");
    assert_eq!(v[0]["manifest"]["days"][0]["max_rev_id"], 110689770);
    // The same day again publishes nothing.
    let again = tmp.path().join("again");
    ok(&[
        "run",
        p,
        "--set",
        "run.max_bad_ratio=1",
        "--set",
        &format!("output={}", again.display()),
    ]);
    assert_eq!(list(&root).len(), 1, "a day applied before is a no-op");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(again.join("corpora/corpus.json")).unwrap()).unwrap();
    assert_eq!(summary["published"], false);
}
