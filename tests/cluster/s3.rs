//! The distributed paths on a real S3-compatible server, named by `DISTILLERY_S3_ENDPOINT`
//! (`.ci/run` starts moto's): the server honours create-only and versioned puts, the output
//! lock holds on it, and a job on two worker processes whose state, staging and output all
//! live in S3 publishes the same output as `distillery run` into a local directory.
//!
//! Without `DISTILLERY_S3_ENDPOINT` these tests skip with a message, except in CI, where they
//! fail. Locally: `moto_server -p 5000 &` and
//! `DISTILLERY_S3_ENDPOINT=http://127.0.0.1:5000 cargo test -p distillery-cli --test cluster s3`.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::sync::Arc;

use distillery_cluster::state::{CommitRecord, FinalRecord, JobRecord};
use distillery_exec::lock::{self, LOCK_FILE, OutputLock};
use distillery_exec::store::Location;
use object_store::aws::AmazonS3Builder;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, UpdateVersion};

use super::*;

/// The S3 endpoint, `None` (after saying so) when it is not set; in CI its absence fails.
fn endpoint() -> Option<String> {
    match std::env::var("DISTILLERY_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e.trim_end_matches('/').to_string()),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "DISTILLERY_S3_ENDPOINT is not set: .ci/run starts moto_server for these tests"
            );
            eprintln!(
                "skipping: DISTILLERY_S3_ENDPOINT is not set (`moto_server -p 5000` and \
                 DISTILLERY_S3_ENDPOINT=http://127.0.0.1:5000 run these tests)"
            );
            None
        }
    }
}

/// A fresh bucket on the S3 server.
struct Bucket {
    endpoint: String,
    name: String,
}

impl Bucket {
    /// Creates a bucket of its own (a plain path-style `PUT /bucket`, which moto takes
    /// unsigned), so that runs against one server do not see each other's objects.
    fn new(endpoint: &str) -> Bucket {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("distillery-{}-{nanos}-{n}", std::process::id());
        let url = url::Url::parse(endpoint).unwrap();
        assert_eq!(url.scheme(), "http", "an http:// endpoint: {endpoint}");
        let host = url.host_str().unwrap().to_string();
        let port = url.port_or_known_default().unwrap();
        let mut s = std::net::TcpStream::connect((host.as_str(), port))
            .unwrap_or_else(|e| panic!("cannot reach the S3 server at {endpoint}: {e}"));
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "PUT /{name} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"),
            "creating bucket {name} at {endpoint}: {answer}"
        );
        Bucket {
            endpoint: endpoint.to_string(),
            name,
        }
    }

    /// What the coordinator and workers read through `AmazonS3Builder::from_env`.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_ACCESS_KEY_ID", "testing".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
        ]
    }

    fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.name)
    }

    /// `s3://bucket/prefix` for this process: the client `open_location` builds from [`Self::env`]
    /// (this process's environment is left alone, other tests run beside it).
    fn location(&self, prefix: &str) -> Location {
        let store = AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_access_key_id("testing")
            .with_secret_access_key("testing")
            .with_region("us-east-1")
            .with_bucket_name(&self.name)
            .build()
            .unwrap();
        Location {
            store: Arc::new(store),
            root: object_store::path::Path::from(prefix),
            display: self.url(prefix),
            local_dir: None,
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Copies every object under `loc` into the directory `to`; returns their names.
async fn download(loc: &Location, to: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for (rel, _) in loc.list("").await.unwrap() {
        let bytes = loc.read(&rel).await.unwrap();
        let p = to.join(&rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, &bytes).unwrap();
        names.push(rel);
    }
    names
}

async fn read_json<T: serde::de::DeserializeOwned>(loc: &Location, rel: &str) -> T {
    let bytes = loc.read(rel).await.unwrap();
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", loc.show(rel)))
}

#[test]
fn s3_conditional_puts_and_the_output_lock() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let bucket = Bucket::new(&endpoint);
    runtime().block_on(async {
        // The server honours what commits and locks rely on: a create-only put (`If-None-Match:
        // *`) refused when the object exists, a versioned put (`If-Match`) refused once the
        // version read is stale.
        let loc = bucket.location("probe");
        let p = loc.path("object");
        let put = |mode: PutMode, body: &'static [u8]| {
            let (store, p) = (loc.store.clone(), p.clone());
            async move {
                store
                    .put_opts(&p, body.into(), PutOptions::from(mode))
                    .await
            }
        };
        put(PutMode::Create, b"first").await.unwrap();
        match put(PutMode::Create, b"second").await {
            Err(object_store::Error::AlreadyExists { .. }) => {}
            other => panic!(
                "a create-only put over an object was not refused (the server ignores \
                 If-None-Match; moto honours it from 5.1.5 on): {other:?}"
            ),
        }
        let head = loc.store.head(&p).await.unwrap();
        let read = UpdateVersion {
            e_tag: head.e_tag.clone(),
            version: head.version.clone(),
        };
        assert!(read.e_tag.is_some(), "no ETag: {head:?}");
        put(PutMode::Update(read.clone()), b"third").await.unwrap();
        match put(PutMode::Update(read), b"fourth").await {
            Err(object_store::Error::Precondition { .. }) => {}
            other => panic!(
                "a put on a stale version was not refused (the server ignores If-Match; moto \
                 honours it from 5.1.5 on): {other:?}"
            ),
        }
        assert_eq!(loc.read("object").await.unwrap().as_ref(), b"third");

        // The output lock: one job at a time, the holder named.
        let out = bucket.location("out");
        let a = OutputLock::new("job-a", "p");
        lock::acquire(&out, &a, |_| false).await.unwrap();
        assert_eq!(lock::holder(&out).await.unwrap(), Some(a.clone()));
        // The same job again (a coordinator resuming it) keeps it.
        lock::acquire(&out, &a, |_| false).await.unwrap();
        let b = OutputLock::new("job-b", "q");
        let e = lock::acquire(&out, &b, |_| false)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("in use by job job-a"), "{e}");
        assert!(e.contains(&out.show(LOCK_FILE)), "{e}");
        // A lock whose job ended is taken over (a versioned put on the lock read).
        lock::acquire(&out, &b, |j| j == "job-a").await.unwrap();
        assert_eq!(lock::holder(&out).await.unwrap(), Some(b.clone()));
        // A lock another job took meanwhile is not taken over on the strength of a stale read:
        // job-a's lock came back (as if its coordinator resumed it) after job-b's was read.
        let stale = {
            let got = out.store.get(&out.path(LOCK_FILE)).await.unwrap();
            UpdateVersion {
                e_tag: got.meta.e_tag.clone(),
                version: got.meta.version.clone(),
            }
        };
        out.write(LOCK_FILE, serde_json::to_vec_pretty(&a).unwrap())
            .await
            .unwrap();
        let c = serde_json::to_vec_pretty(&OutputLock::new("job-c", "r")).unwrap();
        match out
            .store
            .put_opts(
                &out.path(LOCK_FILE),
                c.into(),
                PutOptions::from(PutMode::Update(stale)),
            )
            .await
        {
            Err(object_store::Error::Precondition { .. }) => {}
            other => panic!("a take-over on a stale read replaced the lock: {other:?}"),
        }
        assert_eq!(lock::holder(&out).await.unwrap(), Some(a.clone()));
        // Giving back: only the holder's release frees it; nothing else is left.
        lock::release(&out, "job-b").await.unwrap();
        assert_eq!(lock::holder(&out).await.unwrap(), Some(a));
        let names: Vec<String> = out
            .list("")
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.0)
            .collect();
        assert_eq!(names, [LOCK_FILE]);
        lock::release(&out, "job-a").await.unwrap();
        assert_eq!(lock::holder(&out).await.unwrap(), None);
        assert!(out.list("").await.unwrap().is_empty());
    });
}

#[test]
fn s3_a_job_on_two_workers_with_state_staging_and_output_in_s3() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let bucket = Bucket::new(&endpoint);
    let s = setup();
    let env = bucket.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut c = Cluster::with_state(&s.dir, &[], &bucket.url("state"), &env);
    let out_url = bucket.url("out");
    let rt = runtime();
    let out = bucket.location("out");
    let state = bucket.location("state");

    // No worker yet, so the job cannot end: it holds the output's lock in S3, and a second job
    // into that output is refused, naming it.
    let job = c.submit(&s.pipeline, Path::new(&out_url));
    let held = rt.block_on(lock::holder(&out)).unwrap();
    assert_eq!(held.map(|h| h.job).as_deref(), Some(job.as_str()));
    let o = c.cli(&[
        "submit",
        s.pipeline.to_str().unwrap(),
        "--set",
        &format!("output={out_url}"),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a second job was accepted: {err}");
    assert!(err.contains(&format!("in use by job {job}")), "{err}");

    c.start_workers(&["w1", "w2"], &[]);
    let end = c.wait_end(&job);
    assert!(
        end.contains(" succeeded "),
        "{end}\ncoordinator log:\n{}",
        c.read_log("coordinator")
    );

    // The output in S3 is the local run's, file for file and byte for byte; the lock was given
    // back and no staging is left.
    let got = s.dir.join("downloaded");
    let names = rt.block_on(download(&out, &got));
    assert!(
        !names.iter().any(|n| n.starts_with("_staging/")),
        "staging left after the publish: {names:?}"
    );
    assert!(!names.iter().any(|n| n == LOCK_FILE), "{names:?}");
    assert_same_output(&s.reference, &got);

    // The state in S3: the job, one commit record per task (both workers committed some), and
    // how it ended (written just after the job reads as succeeded).
    rt.block_on(async {
        let rec: JobRecord = read_json(&state, &format!("jobs/{job}/job.json")).await;
        let mut commits = Vec::new();
        for (rel, _) in state.list(&format!("jobs/{job}/commits")).await.unwrap() {
            assert!(rel.ends_with(".json"), "{rel}");
            commits.push(read_json::<CommitRecord>(&state, &rel).await);
        }
        let mut committed: Vec<&str> = commits.iter().map(|c| c.task_id.as_str()).collect();
        committed.sort();
        let mut tasks: Vec<&str> = rec.task_ids.iter().map(String::as_str).collect();
        tasks.sort();
        assert!(tasks.len() > 4, "{tasks:?}");
        assert_eq!(committed, tasks, "one commit record per task");
        let workers: BTreeSet<&str> = commits.iter().map(|c| c.worker_id.as_str()).collect();
        assert_eq!(workers, BTreeSet::from(["w1", "w2"]));

        let fin = format!("jobs/{job}/final.json");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !state.exists(&fin).await.unwrap() {
            assert!(Instant::now() < deadline, "no {}", state.show(&fin));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let fin: FinalRecord = read_json(&state, &fin).await;
        assert_eq!(fin.state, "succeeded", "{fin:?}");
        assert_eq!(fin.output, out_url);
    });
}

/// A multistream dump and its index in S3 are planned into byte-range ingest tasks through
/// object_store (size by HEAD, stream starts by ranged GETs) and read as those ranges give
/// the documents and tables of the same dump read whole from local disk.
#[test]
fn s3_a_multistream_dump_in_s3_is_read_as_byte_ranges() {
    let Some(endpoint) = endpoint() else { return };
    let bucket = Bucket::new(&endpoint);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let dump = write_multistream_dump(dir, 12);
    let size = std::fs::metadata(&dump).unwrap().len();
    let index = dir.join("testwiki-20240101-pages-articles-multistream-index.txt");
    let inputs = bucket.location("inputs");
    runtime().block_on(async {
        for f in [&dump, &index] {
            let name = f.file_name().unwrap().to_str().unwrap();
            inputs.write(name, std::fs::read(f).unwrap()).await.unwrap();
        }
    });
    let remote = format!(
        "{}/{}",
        bucket.url("inputs"),
        dump.file_name().unwrap().to_str().unwrap()
    );
    let pipeline = dir.join("wiki.toml");
    std::fs::write(
        &pipeline,
        format!(
            "version = 1\nname = \"wiki\"\noutput = \"unused\"\n[run]\nshards = 2\n\
             [[inputs]]\nname = \"wiki\"\nformat = \"mediawiki\"\npaths = [\"{}\"]\n",
            dump.display()
        ),
    )
    .unwrap();
    let whole = dir.join("whole");
    run_into(&pipeline, &whole, &["run.split_bytes=0"]);
    let ranged = dir.join("ranged");
    let o = bin()
        .envs(bucket.env())
        .args(["run", "-q"])
        .arg(&pipeline)
        .args(["--set", &format!("inputs.wiki.paths=[\"{remote}\"]")])
        .args(["--set", &format!("run.split_bytes={}", size / 4)])
        .args(["--set", &format!("output={}", ranged.display())])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ranged.join("_summary.json")).unwrap()).unwrap();
    let tasks = summary["stages"][0]["tasks"].as_array().unwrap().len();
    assert!(tasks >= 2, "{tasks} ingest task(s): {summary}");
    for table in ["documents", "tables"] {
        let (a, b) = (sorted_rows(&whole, table), sorted_rows(&ranged, table));
        assert!(a.len() >= 100, "{table}: {} rows", a.len());
        assert!(
            a == b,
            "table {table} differs between S3 byte ranges and a local read"
        );
    }
}

/// A page of a MediaWiki export: id, title, revision, text.
fn page(id: i64, title: &str, rev: i64, text: &str) -> String {
    format!(
        "<page><title>{title}</title><ns>0</ns><id>{id}</id><revision><id>{rev}</id>\
         <timestamp>2026-12-01T10:00:{:02}Z</timestamp><text>{text}</text></revision></page>\n",
        rev % 60
    )
}

fn export(pages: &str) -> String {
    format!(
        "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\" version=\"0.11\">\n\
         {pages}</mediawiki>\n"
    )
}

/// Uploads the files of the local folder `dir` under `loc`'s `prefix`.
async fn upload(loc: &Location, prefix: &str, dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        loc.write(
            &format!("{prefix}/{name}"),
            std::fs::read(e.path()).unwrap(),
        )
        .await
        .unwrap();
    }
}

/// A daily adds-changes folder in S3 is a night's input like a local one: checked (status,
/// maxrevid, the pages file's MD5 read through object_store), applied to the corpus, not read
/// again when repeated, and refused by name when its pages file does not match its sum.
#[test]
fn s3_a_daily_folder_in_s3_advances_a_corpus() {
    let Some(endpoint) = endpoint() else { return };
    let bucket = Bucket::new(&endpoint);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let base: String = (1..=3)
        .map(|i| page(i, &format!("Place {i}"), i, &format!("Place {i} is old.")))
        .collect();
    std::fs::write(dir.join("snapshot.xml"), export(&base)).unwrap();
    let root = dir.join("corpus");
    let pipeline = dir.join("nightly.toml");
    std::fs::write(
        &pipeline,
        format!(
            "version = 1\nname = \"nightly\"\noutput = \"unused\"\n\
             [[inputs]]\nname = \"wiki\"\nformat = \"mediawiki\"\npaths = [\"{}\"]\n\
             options = {{ namespaces = [0] }}\n\
             [[stages]]\nkind = \"corpus\"\noptions = {{ root = \"{}\" }}\n",
            dir.join("snapshot.xml").display(),
            root.display()
        ),
    )
    .unwrap();
    run_into(&pipeline, &dir.join("o0"), &[]);
    // Day 1 revises page 2; day 2's pages file is damaged after its sum was taken.
    let days = bucket.location("incr/enwiki");
    let day1 = dir.join("20261201");
    distillery_testkit::incr::daily_folder(
        &day1,
        "enwiki",
        "20261201",
        &export(&page(2, "Place 2", 10, "Place 2 is new.")),
        10,
    );
    let day2 = dir.join("20261202");
    distillery_testkit::incr::daily_folder(
        &day2,
        "enwiki",
        "20261202",
        &export(&page(3, "Place 3", 11, "Place 3 is new.")),
        11,
    );
    std::fs::write(
        day2.join("enwiki-20261202-pages-meta-hist-incr.xml.bz2"),
        b"truncated",
    )
    .unwrap();
    runtime().block_on(async {
        upload(&days, "20261201", &day1).await;
        upload(&days, "20261202", &day2).await;
    });
    let night = |date: &str, out: &str| {
        bin()
            .envs(bucket.env())
            .args(["run", "-q"])
            .arg(&pipeline)
            .args([
                "--set",
                &format!(
                    "inputs.wiki.paths=[\"{}\"]",
                    bucket.url(&format!("incr/enwiki/{date}"))
                ),
            ])
            .args(["--set", &format!("output={}", dir.join(out).display())])
            .output()
            .unwrap()
    };
    let o = night("20261201", "o1");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let corpus = |out: &str| -> serde_json::Value {
        let s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(out).join("_summary.json")).unwrap())
                .unwrap();
        s["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["stage"] == "corpus")
            .unwrap()
            .clone()
    };
    let c1 = corpus("o1");
    assert_eq!(c1["counters"]["days.applied"], 1, "{c1}");
    assert_eq!(c1["counters"]["pages.changed"], 1, "{c1}");
    let cat = bin().args(["corpus", "cat"]).arg(&root).output().unwrap();
    let text = String::from_utf8_lossy(&cat.stdout);
    assert!(
        text.contains("Place 2 is new.") && !text.contains("Place 2 is old."),
        "{text}"
    );
    // The same day again: not read, nothing new.
    let o = night("20261201", "o2");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c2 = corpus("o2");
    assert_eq!(c2["records_in"], 0, "{c2}");
    assert_eq!(c2["counters"]["days.repeated"], 1, "{c2}");
    // The damaged day is refused, naming the file and the sums.
    let o = night("20261202", "o3");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("MD5") && err.contains("enwiki-20261202-pages-meta-hist-incr.xml.bz2"),
        "{err}"
    );
}
