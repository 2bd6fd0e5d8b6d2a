//! End-to-end tests of the `distillery` binary: the quick start, outputs read back by
//! DataFusion (`inspect`), pyarrow and `hseq verify`, determinism, pipeline-file errors,
//! corrupted inputs and the bad-record threshold, and every shared sample. The label stage,
//! the SFT files and their Python loadability are in [`label`].

mod cirag;
mod confine;
mod corpus;
mod corpus_kg;
mod daily;
mod export;
mod freebase;
mod hostile;
mod index;
mod label;
mod planner;
mod ras;
mod relevance;
mod report_html;
mod revelator;
mod router;
mod subgraph;
mod text2triple;
mod triples;
mod ui;
mod verify;
mod wikidata;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The sentence-transformers model directory of `DISTILLERY_EMBED_MODEL` (`.ci/run` unpacks
/// all-MiniLM-L6-v2), or `None` with a message saying what is skipped.
fn embed_model(skipped: &str) -> Option<String> {
    match std::env::var("DISTILLERY_EMBED_MODEL") {
        Ok(m) if !m.is_empty() => Some(m),
        _ => {
            eprintln!(
                "skipping {skipped}: DISTILLERY_EMBED_MODEL is not set (a sentence-transformers model directory)"
            );
            None
        }
    }
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_distillery"));
    c.current_dir(repo()).arg("--quiet");
    c
}

fn run(args: &[&str]) -> Output {
    let out = bin().args(args).output().expect("binary runs");
    eprintln!(
        "$ distillery {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "distillery {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

fn sql_json(out_dir: &Path, sql: &str) -> Vec<serde_json::Value> {
    let s = ok(&[
        "inspect",
        out_dir.to_str().unwrap(),
        "--sql",
        sql,
        "--format",
        "json",
    ]);
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("bad json {e}: {s}"))
}

fn count(out_dir: &Path, sql: &str) -> i64 {
    let rows = sql_json(out_dir, sql);
    rows[0]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .as_i64()
        .unwrap()
}

/// A teacher sample's lineage: it names the teacher `model` (no revision set in the tests)
/// and response-cache entries that exist under `cache` (`<fan>/<digest>.json`), `n` of them
/// when given.
fn lineage_check(sample: &serde_json::Value, cache: &Path, model: &str, n: Option<usize>) {
    assert_eq!(sample["teacher"], model, "{sample}");
    let entries = sample["cache_entries"].as_array().unwrap();
    assert!(!entries.is_empty(), "{sample}");
    if let Some(n) = n {
        assert_eq!(entries.len(), n, "{sample}");
    }
    for e in entries {
        let e = e.as_str().unwrap();
        let file = cache.join(&e[..2]).join(format!("{e}.json"));
        assert!(file.is_file(), "no cache entry {}", file.display());
    }
}

fn manifest(out_dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out_dir.join("_manifest.json")).unwrap()).unwrap()
}

fn summary(out_dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(out_dir.join("_summary.json")).unwrap()).unwrap()
}

fn stage<'a>(s: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    s["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {s}"))
}

fn shared(rel: &str) -> Option<PathBuf> {
    let p = repo().join("../shared/data").join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipping: {} not found (../shared/data is absent)",
            p.display()
        );
        None
    }
}

/// Runs `tests/python/<script>` with `args` when python3 can import `modules` (in CI, with
/// `CI` set, it must: `.ci/run` installs them) and asserts it succeeds; its stdout, or `None`
/// with a message when the modules are missing outside CI.
fn python_script(modules: &str, script: &str, args: &[&std::ffi::OsStr]) -> Option<String> {
    let has = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !has {
        assert!(
            std::env::var_os("CI").is_none(),
            "python {modules} required in CI (.ci/run installs them)"
        );
        eprintln!("skipping {script}: python3 with {modules} not found");
        return None;
    }
    let out = Command::new("python3")
        .arg(repo().join("tests/python").join(script))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

/// Gzips `path` beside it (`path.gz`), keeping it.
fn gzip(path: &Path) {
    let status = Command::new("gzip")
        .args(["-1", "-k", "-f"])
        .arg(path)
        .status()
        .expect("gzip is installed");
    assert!(status.success());
}

/// A KB reader's two paths on the same `data` (over 4 MiB: several of the parallel reader's
/// 1 MiB chunks) of `format`: inputs `plain` (`file`, read line by line) and `gz` (its gzip,
/// parsed in parallel), 3 shards, parallelism 2, every bad line tolerated. Checks that both
/// write every kind of row in the same numbers, then row for row and shard for shard
/// (`compare_inputs.py`). Returns the output directory (in the temporary directory).
fn same_rows_plain_and_gzipped(
    data: &[u8],
    file: &str,
    format: &str,
) -> (tempfile::TempDir, PathBuf) {
    assert!(
        data.len() > 4 << 20,
        "{} bytes: fewer than 4 chunks",
        data.len()
    );
    let tmp = tempfile::tempdir().unwrap();
    let (dir, out) = (tmp.path(), tmp.path().join("out"));
    std::fs::write(dir.join(file), data).unwrap();
    gzip(&dir.join(file));
    let toml = dir.join("pipeline.toml");
    std::fs::write(
        &toml,
        format!(
            "version = 1\nname = \"two\"\noutput = \"{}\"\n[run]\nshards = 3\nparallelism = 2\n\
             max_bad_ratio = 1.0\n\
             [[inputs]]\nname = \"plain\"\nformat = \"{format}\"\npaths = [\"{}\"]\n\
             [[inputs]]\nname = \"gz\"\nformat = \"{format}\"\npaths = [\"{}.gz\"]\n",
            out.display(),
            dir.join(file).display(),
            dir.join(file).display()
        ),
    )
    .unwrap();
    ok(&["run", toml.to_str().unwrap()]);
    let counts = sql_json(
        &out,
        "SELECT t, source, n FROM (\
           SELECT 'triples' AS t, source, count(*) AS n FROM triples GROUP BY source \
           UNION ALL SELECT 'literals', source, count(*) FROM literals GROUP BY source \
           UNION ALL SELECT 'entities', source, count(*) FROM entities GROUP BY source \
           UNION ALL SELECT 'quarantine', source, count(*) FROM quarantine GROUP BY source) \
         ORDER BY t, source",
    );
    assert_eq!(counts.len(), 8, "{counts:?}");
    for pair in counts.chunks(2) {
        assert_eq!(pair[0]["n"], pair[1]["n"], "{counts:?}");
        assert!(pair[0]["n"].as_i64().unwrap() > 0, "{counts:?}");
    }
    python_script(
        "pyarrow",
        "compare_inputs.py",
        &[out.as_os_str(), "plain".as_ref(), "gz".as_ref()],
    );
    (tmp, out)
}

/// pyarrow reads every file of the output with the manifest's row counts.
fn pyarrow_check(out_dir: &Path) {
    python_script("pyarrow", "check_output.py", &[out_dir.as_os_str()]);
}

#[test]
fn quickstart_runs_and_answers_sql() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("qs");
    let set = format!("output={}", out_dir.display());
    let stdout = ok(&["run", "pipelines/quickstart.toml", "--set", &set]);
    assert!(stdout.contains("published"), "{stdout}");

    let m = manifest(&out_dir);
    let rows = |t: &str| {
        m["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == t)
            .map(|x| x["rows"].as_u64().unwrap())
            .unwrap_or(0)
    };
    for t in [
        "documents",
        "tables",
        "triples",
        "questions",
        "segments",
        "entities",
    ] {
        assert!(rows(t) > 0, "table {t} is empty: {m}");
    }
    assert_eq!(rows("quarantine"), 0);
    assert_eq!(m["pipeline"], "quickstart");
    assert_eq!(m["pipeline_hash"].as_str().unwrap().len(), 40);

    // A reader that goes away early (`| head`) ends the output quietly, status 0.
    let mut child = bin()
        .args([
            "inspect",
            out_dir.to_str().unwrap(),
            "--sql",
            "SELECT * FROM range(300000)",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 16];
    std::io::Read::read_exact(&mut child.stdout.take().unwrap(), &mut head).unwrap();
    let closed = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&closed.stderr);
    assert!(
        closed.status.success() && err.is_empty(),
        "{:?}: {err}",
        closed.status
    );

    // DataFusion over the output.
    let docs = count(&out_dir, "SELECT count(*) AS n FROM documents");
    assert_eq!(docs as u64, rows("documents"));
    let wiki = count(
        &out_dir,
        "SELECT count(*) AS n FROM documents WHERE dataset = 'mediawiki' AND redirect IS NULL",
    );
    assert!(wiki >= 2, "{wiki}");
    let q = sql_json(
        &out_dir,
        "SELECT question, answers FROM questions ORDER BY question_id LIMIT 1",
    );
    assert!(q[0]["question"].as_str().unwrap().ends_with('?'));
    // Segments reference existing sources, parents come first.
    let orphans = count(
        &out_dir,
        "SELECT count(*) AS n FROM segments s LEFT JOIN segments p ON s.parent = p.id \
         WHERE s.parent IS NOT NULL AND p.id IS NULL",
    );
    assert_eq!(orphans, 0);
    let levels = sql_json(
        &out_dir,
        "SELECT level, count(*) AS n FROM segments GROUP BY level ORDER BY level",
    );
    let names: Vec<&str> = levels
        .iter()
        .map(|r| r["level"].as_str().unwrap())
        .collect();
    for l in [
        "document",
        "paragraph",
        "sentence",
        "table",
        "table_row",
        "subgraph",
        "triplet",
    ] {
        assert!(names.contains(&l), "no {l} segments: {names:?}");
    }
    // CSV and table renderings.
    let csv = ok(&[
        "inspect",
        out_dir.to_str().unwrap(),
        "--sql",
        "SELECT title FROM documents WHERE dataset = 'mediawiki' ORDER BY title",
        "--format",
        "csv",
    ]);
    assert!(csv.starts_with("title\n"), "{csv}");
    let table = ok(&[
        "inspect",
        out_dir.to_str().unwrap(),
        "--sql",
        "SELECT count(*) AS n FROM triples",
    ]);
    assert!(table.contains("| n "), "{table}");

    // Summary: per-stage counts and round trips.
    let s = summary(&out_dir);
    let h = stage(&s, "hseq");
    assert_eq!(h["counters"]["roundtrip.failed"].as_u64().unwrap_or(0), 0);
    assert!(h["counters"]["roundtrip.documents_ok"].as_u64().unwrap() > 0);
    assert!(h["counters"]["roundtrip.tables_ok"].as_u64().unwrap() > 0);
    assert!(h["counters"]["roundtrip.kg_edges_ok"].as_u64().unwrap() > 0);
    let wiki_stage = stage(&s, "ingest/wiki");
    assert!(wiki_stage["records_out"].as_u64().unwrap() > 0);
    assert!(wiki_stage["bytes_in"].as_u64().unwrap() > 0);

    // hseq verify decodes everything back.
    let v = ok(&["hseq", "verify", out_dir.to_str().unwrap()]);
    assert!(v.contains("documents   ok"), "{v}");

    pyarrow_check(&out_dir);
}

fn parquet_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for t in std::fs::read_dir(dir).unwrap() {
        let t = t.unwrap().path();
        if t.is_dir() {
            for f in std::fs::read_dir(&t).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_none_or(|e| e != "parquet") {
                    continue;
                }
                let rel = f.strip_prefix(dir).unwrap().display().to_string();
                v.push((rel, std::fs::read(&f).unwrap()));
            }
        }
    }
    v.sort();
    v
}

#[test]
fn reruns_write_identical_files_and_shards_are_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    for d in [&a, &b] {
        ok(&[
            "run",
            "pipelines/quickstart.toml",
            "--set",
            &format!("output={}", d.display()),
            "--set",
            "run.shards=3",
        ]);
    }
    let fa = parquet_files(&a);
    let fb = parquet_files(&b);
    assert!(!fa.is_empty());
    assert_eq!(
        fa.iter().map(|x| &x.0).collect::<Vec<_>>(),
        fb.iter().map(|x| &x.0).collect::<Vec<_>>()
    );
    for (x, y) in fa.iter().zip(&fb) {
        assert!(x.1 == y.1, "{} differs between runs", x.0);
    }
    // A rerun into the same place replaces the output cleanly.
    ok(&[
        "run",
        "pipelines/quickstart.toml",
        "--set",
        &format!("output={}", a.display()),
        "--set",
        "run.shards=1",
    ]);
    let one = parquet_files(&a);
    assert!(
        one.iter().all(|(n, _)| n.contains("part-00000-")),
        "stale shards left behind"
    );
    assert_eq!(
        count(&a, "SELECT count(*) FROM documents"),
        count(&b, "SELECT count(*) FROM documents")
    );
    assert!(!a.join("_staging").exists());
}

/// `--version` names the CPU matrix kernels picked on this machine (issue 57: figures depend on
/// the processor, and bench reports print this line); `-V` stays the bare version.
#[test]
fn version_names_the_cpu_matrix_kernels() {
    let long = ok(&["--version"]);
    let kernels = long
        .lines()
        .find_map(|l| l.strip_prefix("cpu matrix kernels: "))
        .unwrap_or_else(|| panic!("no kernels line in {long:?}"));
    assert!(
        ["avx512f", "avx2+fma", "neon", "scalar"].contains(&kernels),
        "{kernels}"
    );
    let short = ok(&["-V"]);
    assert_eq!(
        short.trim(),
        format!("distillery {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn logs_to_a_pipe_carry_no_colour_and_json_logs_are_one_object_a_line() {
    let tmp = tempfile::tempdir().unwrap();
    let run_with = |extra: &[&str], out: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_distillery"))
            .current_dir(repo())
            .args(extra)
            .args(["run", "pipelines/quickstart.toml", "--set"])
            .arg(format!("output={}", tmp.path().join(out).display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stderr).unwrap()
    };
    let text = run_with(&[], "a");
    assert!(text.contains("job published"), "{text}");
    assert!(!text.contains('\u{1b}'), "colour codes in a pipe: {text:?}");
    let json = run_with(&["--log-format", "json"], "b");
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|v| v["fields"]["message"] == "job published" && v["level"] == "INFO"),
        "{json}"
    );
}

#[test]
fn an_output_in_use_or_not_a_directory_is_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    // A job on another host holds the output: refused, naming it, nothing written.
    let lock = out.join("_lock.json");
    std::fs::write(
        &lock,
        r#"{"job": "20261123T000000-abcdef12", "pipeline": "nightly", "host": "elsewhere", "pid": 1, "since": "2026-11-23T00:00:00Z"}"#,
    )
    .unwrap();
    let set = format!("output={}", out.display());
    let r = run(&["run", "pipelines/quickstart.toml", "--set", &set]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("in use by job 20261123T000000-abcdef12 (pipeline `nightly`, host elsewhere"),
        "{err}"
    );
    assert!(!err.contains("Unavailable"), "{err}");
    assert!(!out.join("_manifest.json").exists());
    assert!(lock.exists(), "another job's lock is left alone");
    // Once it is gone, the run goes and gives the lock back when it ends.
    std::fs::remove_file(&lock).unwrap();
    ok(&["run", "pipelines/quickstart.toml", "--set", &set]);
    assert!(out.join("_manifest.json").exists());
    assert!(!lock.exists());
    // An output that is a file is the user's error, not an unavailable coordinator.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let set = format!("output={}", file.display());
    let r = run(&["run", "pipelines/quickstart.toml", "--set", &set]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("a-file: not a directory"), "{err}");
    assert!(!err.contains("Unavailable"), "{err}");
}

#[test]
fn validate_reports_every_problem_and_plan_lists_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "version = 1\noutput = \"out/x\"\nextra = 1\n\n[run]\nshards = 0\n\n[[inputs]]\nname = \"w\"\nformat = \"mediawikii\"\npaths = [\"nope.xml\"]\n\n[[stages]]\nkind = \"hseq\"\ninputs = [\"zzz\"]\n",
    )
    .unwrap();
    let out = run(&["validate", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("5 problems"), "{err}");
    assert!(err.contains(":3:1: extra"), "{err}");
    assert!(err.contains(":6:1: run.shards"), "{err}");
    assert!(err.contains(":10:1: inputs[0].format"), "{err}");
    assert!(err.contains("`zzz` names no input"), "{err}");
    // The missing file too, in the same report as the option errors.
    assert!(
        err.contains(":11:1: inputs[0].paths: nope.xml: no such file"),
        "{err}"
    );

    // Missing input files are reported by validate too, all at once.
    let missing = tmp.path().join("missing.toml");
    std::fs::write(
        &missing,
        "version = 1\noutput = \"out/x\"\n[[inputs]]\nname = \"a\"\nformat = \"hotpotqa\"\npaths = [\"no/such.json\", \"no/*.json\"]\n",
    )
    .unwrap();
    let out = run(&["validate", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no/such.json: no such file"), "{err}");
    assert!(
        err.contains("no/*.json: the pattern matches no file"),
        "{err}"
    );

    let v = ok(&["validate", "pipelines/quickstart.toml"]);
    assert!(v.contains("ok"), "{v}");
    let plan = ok(&["plan", "pipelines/quickstart.toml", "--set", "run.shards=7"]);
    for needle in [
        "shards   7",
        "ingest/wiki",
        "hseq",
        "segments/part-SSSSS",
        "_manifest.json",
        "data/quickstart/wiki.xml",
    ] {
        assert!(plan.contains(needle), "{needle} missing from:\n{plan}");
    }
}

#[test]
fn ingest_command_runs_one_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("kb");
    ok(&[
        "ingest",
        "metaqa-kb",
        "data/quickstart/kb.txt",
        "--out",
        out_dir.to_str().unwrap(),
        "--hseq",
        "--shards",
        "2",
    ]);
    let lines = std::fs::read_to_string(repo().join("data/quickstart/kb.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as i64;
    assert_eq!(count(&out_dir, "SELECT count(*) FROM triples"), lines);
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM segments WHERE level = 'triplet'"
        ),
        lines
    );
    ok(&["hseq", "verify", out_dir.to_str().unwrap()]);
    // Reader options pass through.
    let wiki = tmp.path().join("wiki");
    ok(&[
        "ingest",
        "mediawiki",
        "data/quickstart/wiki.xml",
        "--out",
        wiki.to_str().unwrap(),
        "--option",
        "namespaces=[]",
    ]);
    assert!(count(&wiki, "SELECT count(*) FROM documents WHERE namespace <> 0") >= 1);
}

/// Writes one corrupted file of each kind next to good records.
fn corrupt_inputs(dir: &Path) -> Vec<(String, String, String)> {
    use std::io::Write;
    let mut v = Vec::new();
    // 1. A truncated bz2 wiki dump: the cut falls in the middle of the compressed bytes.
    let page = |t: &str, body: &str| {
        format!(
            "<page><title>{t}</title><ns>0</ns><id>1</id><revision><id>2</id><text>{body}</text></revision></page>\n"
        )
    };
    let mut xml = String::from(
        "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.10/\" version=\"0.10\">\n",
    );
    xml.push_str(&page("Good page", "A good page.\n\nIt has two paragraphs."));
    for i in 0..200 {
        xml.push_str(&page(
            &format!("Filler {i}"),
            &"Filler text of many words. ".repeat(40),
        ));
    }
    xml.push_str("</mediawiki>\n");
    let mut enc = bzip2_write(xml.as_bytes());
    let cut = enc.len() / 2;
    enc.truncate(cut);
    std::fs::write(dir.join("cut.xml.bz2"), &enc).unwrap();
    v.push(("cut".into(), "mediawiki".into(), "cut.xml.bz2".into()));
    // 2. Malformed XML.
    std::fs::write(
        dir.join("bad.xml"),
        format!(
            "<mediawiki>\n{}<page><title>Broken</title><ns>0</ns><revision><text>unclosed</revision></page>\n</mediawiki>\n",
            page("Fine page", "Fine text.")
        ),
    )
    .unwrap();
    v.push(("badxml".into(), "mediawiki".into(), "bad.xml".into()));
    // 3. N-Triples with a broken line and invalid UTF-8.
    let mut nt = Vec::new();
    writeln!(nt, "<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/type.object.name>\t\"One\"@en\t.").unwrap();
    writeln!(
        nt,
        "<http://rdf.freebase.com/ns/m.02>\t<http://rdf.freebase.com/ns/x.y>\tnot a term\t."
    )
    .unwrap();
    nt.extend_from_slice(b"<http://rdf.freebase.com/ns/m.03>\t<http://rdf.freebase.com/ns/type.object.name>\t\"\xff\xfe\"@en\t.\n");
    writeln!(nt, "<http://rdf.freebase.com/ns/m.04>\t<http://rdf.freebase.com/ns/x.y>\t<http://rdf.freebase.com/ns/m.01>\t.").unwrap();
    std::fs::write(dir.join("bad.nt"), nt).unwrap();
    v.push(("badnt".into(), "freebase".into(), "bad.nt".into()));
    // 4. A JSON array with a syntax error in one record and one missing its question.
    std::fs::write(
        dir.join("bad_hotpot.json"),
        r#"[{"_id":"a1","answer":"yes","question":"Is it good?","supporting_facts":[],"context":[["T",["It is good."]]],"type":"comparison","level":"easy"},
{"_id":"a2","answer":"no", "question": oops},
{"_id":"a3","answer":"no","supporting_facts":[],"context":[],"type":"bridge","level":"easy"},
{"_id":"a4","answer":"x","question":"Is it fine?","supporting_facts":[],"context":[["U",["Fine."]]],"type":"bridge","level":"hard"}]"#,
    )
    .unwrap();
    v.push((
        "badjson".into(),
        "hotpotqa".into(),
        "bad_hotpot.json".into(),
    ));
    v
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Writes a logging dump holding one deletion of `title` (log id `id`) late on `date`.
fn deletion_log(path: &Path, id: i64, date: &str, title: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let title = title
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    std::fs::write(
        path,
        format!(
            "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\" version=\"0.11\">\n\
             <logitem><id>{id}</id><timestamp>{}-{}-{}T23:00:00Z</timestamp>\
             <contributor><username>admin</username><id>2</id></contributor>\
             <type>delete</type><action>delete</action><logtitle>{title}</logtitle>\
             <params xml:space=\"preserve\" /></logitem>\n</mediawiki>\n",
            &date[..4],
            &date[4..6],
            &date[6..]
        ),
    )
    .unwrap();
}

fn bzip2_write(data: &[u8]) -> Vec<u8> {
    // The test crate has no bzip2 dependency; use the system tool, which every CI image has.
    // 100 kB blocks: a cut in the middle still leaves complete blocks before it (bz2 can only
    // give back whole blocks, so a file of one 900 kB block cut in half yields nothing).
    let mut child = Command::new("bzip2")
        .args(["-1", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("bzip2 is installed");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(data).unwrap();
    child.wait_with_output().unwrap().stdout
}

#[test]
fn corrupted_inputs_are_quarantined_and_the_threshold_fails_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = corrupt_inputs(tmp.path());
    let mut toml = String::from(
        "version = 1\nname = \"corrupt\"\noutput = \"unused\"\n[run]\nshards = 2\nmax_bad_ratio = 1.0\n",
    );
    for (name, format, file) in &inputs {
        toml.push_str(&format!(
            "[[inputs]]\nname = \"{name}\"\nformat = \"{format}\"\npaths = [\"{}\"]\n",
            tmp.path().join(file).display()
        ));
    }
    toml.push_str("[[stages]]\nkind = \"hseq\"\n");
    let file = tmp.path().join("corrupt.toml");
    std::fs::write(&file, &toml).unwrap();
    let out_dir = tmp.path().join("out");
    ok(&[
        "run",
        file.to_str().unwrap(),
        "--set",
        &format!("output={}", out_dir.display()),
    ]);
    let reasons = sql_json(
        &out_dir,
        "SELECT dataset, reason, count(*) AS n FROM quarantine GROUP BY dataset, reason ORDER BY dataset, reason",
    );
    let has = |d: &str, r: &str| {
        reasons
            .iter()
            .any(|x| x["dataset"] == d && x["reason"] == r)
    };
    assert!(has("mediawiki", "truncated_input"), "{reasons:?}");
    assert!(has("mediawiki", "malformed_xml"), "{reasons:?}");
    assert!(has("freebase", "bad_ntriples"), "{reasons:?}");
    assert!(has("freebase", "invalid_utf8"), "{reasons:?}");
    assert!(has("hotpotqa", "bad_json"), "{reasons:?}");
    assert!(has("hotpotqa", "missing_field"), "{reasons:?}");
    // Every quarantine record names its file and where in it.
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM quarantine WHERE source = '' OR (byte_offset IS NULL AND line IS NULL)"
        ),
        0
    );
    // The good records are all there.
    for title in ["Good page", "Fine page"] {
        assert_eq!(
            count(
                &out_dir,
                &format!("SELECT count(*) FROM documents WHERE title = '{title}'")
            ),
            1,
            "{title}"
        );
    }
    assert!(
        count(
            &out_dir,
            "SELECT count(*) FROM documents WHERE title LIKE 'Filler%'"
        ) > 0
    );
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM (SELECT subject FROM triples UNION ALL \
             SELECT subject FROM literals) WHERE subject IN ('m.01', 'm.04')"
        ),
        2
    );
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM questions WHERE question_id IN ('a1', 'a4')"
        ),
        2
    );
    let s = summary(&out_dir);
    assert!(s["quarantine_by_reason"]["bad_json"].as_u64().unwrap() >= 1);
    assert!(stage(&s, "ingest/badnt")["quarantined"].as_u64().unwrap() >= 2);

    // With a threshold of zero the same run fails, publishes nothing, and the previous
    // output stays as it was.
    let before = std::fs::read(out_dir.join("_manifest.json")).unwrap();
    let out = run(&[
        "run",
        file.to_str().unwrap(),
        "--set",
        &format!("output={}", out_dir.display()),
        "--set",
        "run.max_bad_ratio=0.0",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("max_bad_ratio"), "{err}");
    assert_eq!(
        std::fs::read(out_dir.join("_manifest.json")).unwrap(),
        before
    );
    // The error names the first bad records (file, where, why) and where all of them are
    // kept: those quarantine parts, and nothing else of the failed run, stay in its staging.
    let first = err
        .split("the first: ")
        .nth(1)
        .and_then(|r| r.split("; nothing was published").next())
        .unwrap_or_else(|| panic!("no bad records quoted in: {err}"));
    let quoted: Vec<&str> = first.split("; ").collect();
    assert_eq!(quoted.len(), 3, "{first}");
    let reasons = [
        "truncated_input",
        "malformed_xml",
        "bad_ntriples",
        "invalid_utf8",
        "bad_json",
        "missing_field",
    ];
    for q in quoted {
        assert!(q.starts_with(&tmp.path().display().to_string()), "{q}");
        assert!(q.contains(" line ") || q.contains(" byte "), "{q}");
        assert!(
            reasons.iter().any(|r| q.contains(&format!(": {r}: "))),
            "{q}"
        );
    }
    let kept = err
        .split("kept in ")
        .nth(1)
        .and_then(|r| r.split(" (job").next())
        .unwrap_or_else(|| panic!("no place in: {err}"));
    let mut parts = 0;
    for dir in kept.split(", ") {
        for f in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir}: {e}")) {
            assert!(
                f.unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".parquet")
            );
            parts += 1;
        }
    }
    assert!(parts > 0);
    let staged: Vec<String> = distillery_testkit::files::files_under(&out_dir.join("_staging"))
        .into_iter()
        .map(|(rel, _)| rel)
        .filter(|rel| !rel.contains("/quarantine/"))
        .collect();
    assert!(staged.is_empty(), "{staged:?}");
    ok(&["hseq", "verify", out_dir.to_str().unwrap()]);
}

#[test]
fn every_shared_sample_is_ingested_and_round_trips() {
    if shared("").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("shared");
    ok(&[
        "run",
        "pipelines/shared-samples.toml",
        "--set",
        &format!("output={}", out_dir.display()),
    ]);
    let s = summary(&out_dir);
    for input in [
        "enwiki",
        "freebase",
        "wikidata",
        "fb15k",
        "metaqa_kb",
        "hotpotqa",
        "musique",
        "twowiki",
        "hybridqa",
        "tatqa",
        "metaqa",
        "cwq",
        "simpleqa",
        "webquestions",
        "qald",
        "hotpotadv",
        "zeroshot_re",
    ] {
        let st = stage(&s, &format!("ingest/{input}"));
        assert!(st["records_out"].as_u64().unwrap() > 0, "{input}: {st}");
    }
    let h = stage(&s, "hseq");
    eprintln!("hseq round trips on the shared samples: {}", h["counters"]);
    assert_eq!(h["counters"]["roundtrip.failed"].as_u64().unwrap_or(0), 0);
    let v = ok(&["hseq", "verify", out_dir.to_str().unwrap()]);
    eprintln!("{v}");
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM questions WHERE dataset = 'hotpotqa'"
        ),
        53
    );
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM questions WHERE dataset = 'musique'"
        ),
        70
    );
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM questions WHERE dataset = 'metaqa'"
        ),
        9_947 + 14_872
    );
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM triples WHERE dataset = 'fb15k'"
        ),
        20_466
    );
    for dataset in [
        "cwq",
        "simpleqa",
        "webquestions",
        "qald",
        "hotpotadv",
        "zeroshot-re",
    ] {
        let sql = format!("SELECT count(*) FROM questions WHERE dataset = '{dataset}'");
        assert_eq!(count(&out_dir, &sql), 30, "{dataset}");
    }
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM documents WHERE dataset = 'hotpotadv'"
        ),
        120
    );
    pyarrow_check(&out_dir);
}
