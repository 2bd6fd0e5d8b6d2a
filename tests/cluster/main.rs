//! The cluster harness and the fault tests: a `distillery coordinator` and `distillery worker`
//! processes on loopback, the quick-start pipeline plus a larger generated HotpotQA input, and
//! each fault ending with outputs identical (same files, same bytes, same rows) to a fault-free
//! `distillery run` of the same pipeline.

mod page;
mod s3;
mod tls;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use distillery_testkit::fault_server::FaultServer;
use distillery_testkit::stand_in::teacher;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_distillery"));
    c.current_dir(repo());
    c.env_remove("DISTILLERY_FAULTS")
        .env_remove("DISTILLERY_FAULT_STORE_WRITES")
        .env_remove("DISTILLERY_TOKEN")
        .env("RUST_LOG", "info");
    c
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes the test pipeline: the quick-start inputs plus `files` generated HotpotQA files of
/// `per_file` questions each, HSEQ and labels over both QA inputs.
fn write_pipeline(dir: &Path, files: usize, per_file: usize) -> PathBuf {
    let gen_dir = dir.join("gen");
    std::fs::create_dir_all(&gen_dir).unwrap();
    for f in 0..files {
        let mut qs = Vec::new();
        for i in 0..per_file {
            let n = f * per_file + i;
            let a = format!("Person {n}");
            let b = format!("Town {}", n % 97);
            qs.push(serde_json::json!({
                "_id": format!("gen-{n:06}"),
                "question": format!("Where was the author of Book {n} born?"),
                "answer": b,
                "type": "bridge",
                "level": "medium",
                "supporting_facts": [[format!("Book {n}"), 0], [a.clone(), 0]],
                "context": [
                    [format!("Book {n}"), [format!("Book {n} is a novel written by {a}."), format!(" It was published in {}.", 1900 + n % 120)]],
                    [a.clone(), [format!("{a} was born in {b}."), format!(" {a} wrote {} books.", n % 13 + 1)]],
                    [format!("Book {} sequel", n), [format!("A sequel to Book {n} never appeared."), " Critics noted its absence.".to_string()]],
                ]
            }));
        }
        std::fs::write(
            gen_dir.join(format!("part-{f}.json")),
            serde_json::to_vec(&qs).unwrap(),
        )
        .unwrap();
    }
    let text = std::fs::read_to_string(repo().join("pipelines/quickstart.toml"))
        .unwrap()
        .replace(
            "[[stages]]\nkind = \"hseq\"",
            &format!(
                "[[inputs]]\nname = \"gen\"\nformat = \"hotpotqa\"\npaths = [\"{}/part-*.json\"]\nsplit = \"train\"\n\n[[stages]]\nkind = \"hseq\"",
                gen_dir.display()
            ),
        )
        .replace("inputs = [\"hotpot\"]", "inputs = [\"hotpot\", \"gen\"]");
    assert!(
        text.contains("name = \"gen\""),
        "quickstart.toml changed shape"
    );
    let p = dir.join("pipeline.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Every file of an output: data files byte for byte; the manifest without its run id and index record; the
/// summary's row counts.
fn snapshot(out: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    for (rel, p) in distillery_testkit::files::files_under(out) {
        // Index versions are named by build time: the same content under another name.
        if rel.starts_with("index/") || rel.starts_with("indexes/") {
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        let bytes = match rel.as_str() {
            "_manifest.json" => {
                let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                v["run_id"] = serde_json::Value::Null;
                // The index record names the output it was built for: its size varies.
                if let Some(files) = v["files"].as_array_mut() {
                    files.retain(|f| !f["path"].as_str().unwrap_or("").starts_with("indexes/"));
                }
                serde_json::to_vec_pretty(&v).unwrap()
            }
            "_summary.json" => {
                let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                let rows: Vec<_> = v["stages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| {
                        (
                            s["stage"].clone(),
                            s["records_in"].clone(),
                            s["records_out"].clone(),
                            s["quarantined"].clone(),
                        )
                    })
                    .collect();
                format!("{rows:?}").into_bytes()
            }
            _ => bytes,
        };
        m.insert(rel, bytes);
    }
    m
}

fn assert_same_output(reference: &Path, got: &Path) {
    let (a, b) = (snapshot(reference), snapshot(got));
    let names = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&a), names(&b), "different files");
    for (k, v) in &a {
        assert!(&b[k] == v, "{k} differs from the fault-free run");
    }
    assert!(a.len() > 20, "the output is too small to prove much: {a:?}");
}

/// A fault-free reference output of the pipeline, by `distillery run`.
fn reference(dir: &Path, pipeline: &Path) -> PathBuf {
    let out = dir.join("reference");
    run_into(pipeline, &out, &[]);
    out
}

/// `distillery run` of a pipeline into `out`, with more `--set` overrides.
fn run_into(pipeline: &Path, out: &Path, set: &[&str]) {
    let mut c = bin();
    c.args(["run", "-q"]).arg(pipeline);
    for s in set {
        c.args(["--set", s]);
    }
    let o = c
        .arg("--set")
        .arg(format!("output={}", out.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "run into {} failed: {}",
        out.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A coordinator and workers as processes on loopback.
struct Cluster {
    dir: PathBuf,
    port: u16,
    metrics_port: u16,
    token_file: PathBuf,
    coordinator: Option<Child>,
    coordinator_args: Vec<String>,
    workers: Vec<(String, Child)>,
    starts: usize,
    /// `--state`: `state` in the test's directory, or an object-store URL.
    state: String,
    /// More environment for the coordinator, the workers and the client commands (the object
    /// store's endpoint and credentials).
    env: Vec<(String, String)>,
}

impl Cluster {
    fn new(dir: &Path, coordinator_args: &[&str]) -> Cluster {
        let state = dir.join("state").display().to_string();
        Cluster::with_state(dir, coordinator_args, &state, &[])
    }

    /// A cluster whose coordinator keeps its state at `state`, every process with `env` set.
    fn with_state(
        dir: &Path,
        coordinator_args: &[&str],
        state: &str,
        env: &[(&str, &str)],
    ) -> Cluster {
        let token_file = dir.join("token");
        std::fs::write(&token_file, "test-token-0123456789").unwrap();
        let mut c = Cluster {
            dir: dir.to_path_buf(),
            port: free_port(),
            metrics_port: free_port(),
            token_file,
            coordinator: None,
            coordinator_args: coordinator_args.iter().map(|s| s.to_string()).collect(),
            workers: Vec::new(),
            starts: 0,
            state: state.to_string(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        c.start_coordinator();
        c
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .unwrap()
    }

    fn read_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
    }

    fn start_coordinator(&mut self) {
        self.starts += 1;
        let mut c = bin();
        c.arg("coordinator")
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{}", self.metrics_port))
            .arg("--state")
            .arg(&self.state)
            .arg("--token-file")
            .arg(&self.token_file)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args([
                "--lease-secs",
                "2",
                "--heartbeat-ms",
                "100",
                "--backoff-ms",
                "100",
                "--straggler-factor",
                "0",
            ])
            .args(&self.coordinator_args)
            .stdout(Stdio::null())
            .stderr(self.log("coordinator"));
        self.coordinator = Some(c.spawn().unwrap());
        // Ready once /readyz answers.
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if http_get(self.metrics_port, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("coordinator not ready: {}", self.read_log("coordinator"));
    }

    fn start_worker(&mut self, id: &str, env: &[(&str, &str)]) {
        let mut c = bin();
        c.arg("worker")
            .args([
                "--coordinator",
                &self.url(),
                "--worker-id",
                id,
                "--slots",
                "1",
                "--parallelism",
                "1",
                "--grace-secs",
                "20",
            ])
            .arg("--token-file")
            .arg(&self.token_file)
            .stdout(Stdio::null())
            .stderr(self.log(id))
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        for (k, v) in env {
            c.env(k, v);
        }
        self.workers.push((id.to_string(), c.spawn().unwrap()));
    }

    fn start_workers(&mut self, ids: &[&str], env: &[(&str, &str)]) {
        for id in ids {
            self.start_worker(id, env);
        }
    }

    fn worker(&mut self, id: &str) -> &mut Child {
        &mut self.workers.iter_mut().find(|(w, _)| w == id).unwrap().1
    }

    fn cli(&self, args: &[&str]) -> Output {
        bin()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(args)
            .args(["--coordinator", &self.url()])
            .arg("--token-file")
            .arg(&self.token_file)
            .output()
            .unwrap()
    }

    fn submit(&self, pipeline: &Path, out: &Path) -> String {
        let o = self.cli(&[
            "submit",
            pipeline.to_str().unwrap(),
            "--set",
            &format!("output={}", out.display()),
        ]);
        assert!(
            o.status.success(),
            "submit: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    }

    fn status(&self, job: &str) -> String {
        let o = self.cli(&["status", job]);
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    /// Waits until `cond` holds for the job's status text.
    fn wait_for(&self, job: &str, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let s = self.status(job);
            if cond(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; status:\n{s}\ncoordinator log:\n{}",
                self.read_log("coordinator")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_end(&self, job: &str) -> String {
        self.wait_for(job, "the job to end", |s| {
            let head = s.lines().next().unwrap_or("");
            head.contains(" succeeded ")
                || head.contains(" failed ")
                || head.contains(" cancelled ")
        })
    }

    /// The worker running a task now, by the status listing.
    fn busy_worker(&self, job: &str) -> String {
        let s = self.wait_for(job, "a busy worker", |s| {
            s.lines()
                .any(|l| l.trim_start().starts_with('w') && l.contains("running   1"))
        });
        s.lines()
            .find(|l| l.trim_start().starts_with('w') && l.contains("running   1"))
            .and_then(|l| l.split_whitespace().next())
            .unwrap()
            .to_string()
    }

    fn metrics(&self) -> String {
        http_get(self.metrics_port, "/metrics").unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(c) = &mut self.coordinator {
            let _ = c.kill();
            let _ = c.wait();
        }
        for (_, w) in &mut self.workers {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

fn signal(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

struct Setup {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    pipeline: PathBuf,
    reference: PathBuf,
    out: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let pipeline = write_pipeline(&dir, 4, 150);
    let reference = reference(&dir, &pipeline);
    Setup {
        out: dir.join("out"),
        _tmp: tmp,
        dir,
        pipeline,
        reference,
    }
}

#[test]
fn run_and_submit_to_three_worker_processes_give_identical_outputs() {
    let s = setup();
    let mut c = Cluster::new(&s.dir, &[]);
    c.start_workers(&["w1", "w2", "w3"], &[]);
    // `submit --wait` exits 0 only when the job succeeded.
    let o = c.cli(&[
        "submit",
        s.pipeline.to_str().unwrap(),
        "--set",
        &format!("output={}", s.out.display()),
        "--wait",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_output(&s.reference, &s.out);
    // Every worker took part, and the metrics say what happened.
    for w in ["w1", "w2", "w3"] {
        assert!(c.read_log(w).contains("task committed"), "{w} ran nothing");
    }
    // 8 ingest tasks, 2 hseq shards, 2 label shards, the label merge and the index build.
    let m = c.metrics();
    assert!(
        metric(&m, "distillery_coordinator_commits_total") == 14.0,
        "{m}"
    );
    assert!(
        m.contains("distillery_stage_records_total{stage=\"hseq\"}"),
        "{m}"
    );
    // No token, no work.
    let o = bin()
        .args(["status", "--coordinator", &c.url()])
        .env("DISTILLERY_TOKEN", "wrong")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("Unauthenticated"));
    // The token never reaches the logs.
    for name in ["coordinator", "w1", "w2", "w3"] {
        assert!(!c.read_log(name).contains("test-token-0123456789"));
    }
}

#[test]
fn fault_1_a_worker_killed_mid_task() {
    let s = setup();
    let mut c = Cluster::new(&s.dir, &[]);
    let slow = [("DISTILLERY_FAULTS", "delay:ingest/:3000")];
    c.start_workers(&["w1", "w2"], &slow);
    let job = c.submit(&s.pipeline, &s.out);
    let victim = c.busy_worker(&job);
    c.worker(&victim).kill().unwrap(); // SIGKILL
    let end = c.wait_end(&job);
    assert!(end.contains(" succeeded "), "{end}");
    assert_same_output(&s.reference, &s.out);
    let m = c.metrics();
    assert!(
        metric(&m, "distillery_coordinator_lease_expiries_total") >= 1.0,
        "{m}"
    );
}

#[test]
fn fault_2_the_coordinator_killed_and_restarted_mid_job() {
    let s = setup();
    let mut c = Cluster::new(&s.dir, &[]);
    let slow = [("DISTILLERY_FAULTS", "delay:ingest/:700")];
    c.start_workers(&["w1", "w2"], &slow);
    let job = c.submit(&s.pipeline, &s.out);
    c.wait_for(&job, "a first commit", |st| {
        st.contains("ingest") && !st.contains(" 0/") && st.contains(" running ")
    });
    let mut coord = c.coordinator.take().unwrap();
    coord.kill().unwrap();
    coord.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    c.start_coordinator();
    let end = c.wait_end(&job);
    assert!(end.contains(" succeeded "), "{end}");
    assert_same_output(&s.reference, &s.out);
    let log = c.read_log("coordinator");
    assert!(log.contains("job resumed from the state store"), "{log}");
    assert_eq!(c.starts, 2);
}

#[test]
fn fault_3_a_silent_worker_past_its_lease_is_refused_when_it_publishes() {
    let s = setup();
    let mut c = Cluster::new(&s.dir, &[]);
    // w1 stops heartbeating for 20 s when it takes an ingest task, which it finishes after
    // 3.5 s, well past its 2 s lease; the task has moved to w2 by then.
    c.start_worker(
        "w1",
        &[("DISTILLERY_FAULTS", "mute:ingest/:20000,delay:ingest/:3500")],
    );
    let job = c.submit(&s.pipeline, &s.out);
    c.busy_worker(&job);
    c.start_worker("w2", &[]);
    let end = c.wait_end(&job);
    assert!(end.contains(" succeeded "), "{end}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.read_log("w1").contains("completion refused") {
        assert!(
            Instant::now() < deadline,
            "w1 never tried to publish:\n{}",
            c.read_log("w1")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let m = c.metrics();
    assert!(
        metric(&m, "distillery_coordinator_commits_refused_total") >= 1.0,
        "{m}"
    );
    assert_same_output(&s.reference, &s.out);
}

#[test]
fn fault_4_object_store_writes_fail_for_a_while() {
    let s = setup();
    let mut c = Cluster::new(&s.dir, &["--max-attempts", "8"]);
    c.start_workers(&["w1", "w2"], &[("DISTILLERY_FAULT_STORE_WRITES", "3")]);
    let job = c.submit(&s.pipeline, &s.out);
    let end = c.wait_end(&job);
    assert!(end.contains(" succeeded "), "{end}");
    let logs = c.read_log("w1") + &c.read_log("w2");
    assert!(
        logs.contains("injected object-store write failure"),
        "{logs}"
    );
    assert!(metric(&c.metrics(), "distillery_coordinator_task_retries_total") >= 1.0);
    assert_same_output(&s.reference, &s.out);
}

#[test]
fn fault_5_a_task_that_always_fails_fails_the_job_cleanly() {
    let s = setup();
    let mut c = Cluster::new(&s.dir, &["--max-attempts", "3"]);
    c.start_workers(
        &["w1", "w2"],
        &[("DISTILLERY_FAULTS", "fail:stage/label/merge")],
    );
    let o = c.cli(&[
        "submit",
        s.pipeline.to_str().unwrap(),
        "--set",
        &format!("output={}", s.out.display()),
        "--wait",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    // The report names the task, its attempts and their errors.
    assert!(
        err.contains("task stage/label/merge failed after 3 attempt(s)"),
        "{err}"
    );
    assert_eq!(
        err.matches("injected failure of stage/label/merge").count(),
        3,
        "{err}"
    );
    // Nothing was published: no manifest, no table part, no staging left.
    std::thread::sleep(Duration::from_millis(500));
    let files: Vec<String> = snapshot(&s.out).into_keys().collect();
    assert!(files.is_empty(), "published or left behind: {files:?}");
}

#[test]
fn fault_6_sigterm_drains_a_worker_and_the_job_completes() {
    let s = setup();
    let mut c = Cluster::new(&s.dir, &[]);
    let slow = [("DISTILLERY_FAULTS", "delay:ingest/:3000")];
    c.start_workers(&["w1", "w2"], &slow);
    let job = c.submit(&s.pipeline, &s.out);
    let victim = c.busy_worker(&job);
    signal(c.worker(&victim), "TERM");
    let status = c.worker(&victim).wait().unwrap();
    assert!(status.success(), "a drained worker exits 0: {status:?}");
    let log = c.read_log(&victim);
    let drain = log.find("draining").expect("drain logged");
    assert!(
        log[drain..].contains("task committed"),
        "it finished its task first:\n{log}"
    );
    let end = c.wait_end(&job);
    assert!(end.contains(" succeeded "), "{end}");
    assert_same_output(&s.reference, &s.out);
}

#[test]
fn kubernetes_manifests_render_and_validate_offline() {
    let o = Command::new("bash")
        .arg("scripts/validate-k8s.sh")
        .current_dir(repo())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(2) && std::env::var_os("CI").is_none() {
        eprintln!(
            "skipping: the k8s tools are not installed (bash scripts/install-k8s-tools.sh):\n{out}"
        );
        return;
    }
    assert!(o.status.success(), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("manifests:"))
        .unwrap_or_else(|| panic!("no summary line:\n{out}"));
    assert!(line.ends_with(" 0 failed"), "{line}");
    for kind in [
        "Deployment/distillery-coordinator",
        "CronJob/",
        "PodDisruptionBudget/",
        "Job/",
        "Service/vllm",
        "ServiceMonitor/distillery-coordinator",
        "PodMonitor/distillery-workers",
    ] {
        assert!(out.contains(kind), "{kind} not validated:\n{out}");
    }
}

/// The rows of a table of an output as JSON lines, sorted: the same rows whatever the parts.
fn sorted_rows(out: &Path, table: &str) -> Vec<String> {
    let o = bin()
        .arg("inspect")
        .arg(out)
        .args([
            "--sql",
            &format!("SELECT * FROM {table}"),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "inspect {table}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut rows: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.to_string())
        .collect();
    rows.sort();
    rows
}

fn sorted_lines(path: &Path) -> Vec<String> {
    let mut l: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    l.sort();
    l
}

#[test]
fn labels_pipeline_in_four_shard_tasks_on_three_workers_equals_one_shard_run() {
    let shared = repo().join("../shared/data/hotpotqa");
    if !shared.exists() {
        eprintln!("skipping: ../shared/data is absent");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pipeline = repo().join("pipelines/labels.toml");
    let one = dir.join("one");
    run_into(&pipeline, &one, &["run.shards=1"]);

    let mut c = Cluster::new(dir, &[]);
    c.start_workers(&["w1", "w2", "w3"], &[]);
    let four = dir.join("four");
    let o = c.cli(&[
        "submit",
        pipeline.to_str().unwrap(),
        "--set",
        "run.shards=4",
        "--set",
        &format!("output={}", four.display()),
        "--wait",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The label stage ran as 4 shard tasks and a merge, the shards on at least 2 workers.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(four.join("_summary.json")).unwrap()).unwrap();
    let label = summary["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "label")
        .unwrap();
    let tasks = label["tasks"].as_array().unwrap();
    let ids: Vec<&str> = tasks.iter().map(|t| t["task"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "stage/label/shard-00000",
            "stage/label/shard-00001",
            "stage/label/shard-00002",
            "stage/label/shard-00003",
            "stage/label/merge"
        ]
    );
    let workers: std::collections::BTreeSet<&str> = tasks[..4]
        .iter()
        .map(|t| t["worker"].as_str().unwrap())
        .collect();
    assert!(workers.len() >= 2, "shard tasks all ran on {workers:?}");
    for t in tasks {
        assert!(t["attempts"].as_u64().unwrap() >= 1, "{t}");
        assert!(t["records_out"].as_u64().unwrap() > 0, "{t}");
    }
    // `status --format json` names the same tasks and workers.
    let o = c.cli(&["status", "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let status: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(status["state"], "succeeded", "{status}");
    let listed = status["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "label")
        .unwrap()["tasks"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(listed.len(), 5, "{status}");
    for (l, t) in listed.iter().zip(tasks) {
        assert_eq!(l["task"], t["task"]);
        assert_eq!(l["worker"], t["worker"]);
        assert_eq!(l["state"], "committed");
        assert_eq!(l["records_out"], t["records_out"]);
    }

    // The same SFT lines, label records and report as the one-shard run.
    for f in ["sft/train.jsonl", "sft/validation.jsonl"] {
        let (a, b) = (sorted_lines(&one.join(f)), sorted_lines(&four.join(f)));
        assert!(a.len() > 100, "{f}: {} lines", a.len());
        assert!(a == b, "{f} differs between 1 and 4 shards");
    }
    for f in ["label_report.json", "sft/dataset_info.json"] {
        assert_eq!(
            std::fs::read(one.join(f)).unwrap(),
            std::fs::read(four.join(f)).unwrap(),
            "{f}"
        );
    }
    for table in ["labels", "sft"] {
        let (a, b) = (sorted_rows(&one, table), sorted_rows(&four, table));
        assert!(!a.is_empty());
        assert!(a == b, "table {table} differs between 1 and 4 shards");
    }
    // The duplicate the shared samples hold is removed once, whatever the shard count.
    let counter = |out: &Path, name: &str| {
        let s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("_summary.json")).unwrap()).unwrap();
        s["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stage"] == "label")
            .unwrap()["counters"][name]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        counter(&one, "duplicates_removed"),
        counter(&four, "duplicates_removed")
    );
    assert!(counter(&four, "duplicates_removed") >= 1);
}

/// The triples pipeline against the stand-in teacher: 4 tasks (one per documents shard) and
/// a merge on 3 workers give the triples, quarantine rows and exports of a one-shard run.
#[test]
fn triples_pipeline_in_four_tasks_on_three_workers_equals_one_shard_run() {
    let shared = repo().join("../shared/data/hotpotqa");
    if !shared.exists() {
        eprintln!("skipping: ../shared/data is absent");
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![], teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pipeline = repo().join("pipelines/triples.toml");
    let at = |cache: &str| {
        vec![
            format!("llm.base_url={}", server.url),
            "llm.model=stand-in".to_string(),
            format!("llm.cache={}", dir.join(cache).display()),
        ]
    };
    let one = dir.join("one");
    let mut set: Vec<String> = at("cache-one");
    set.push("run.shards=1".into());
    let refs: Vec<&str> = set.iter().map(String::as_str).collect();
    run_into(&pipeline, &one, &refs);

    let mut c = Cluster::new(dir, &[]);
    c.start_workers(&["w1", "w2", "w3"], &[]);
    let four = dir.join("four");
    let mut args: Vec<String> = vec!["submit".into(), pipeline.display().to_string()];
    for s in at("cache-four").into_iter().chain([
        "run.shards=4".to_string(),
        format!("output={}", four.display()),
    ]) {
        args.push("--set".into());
        args.push(s);
    }
    args.push("--wait".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = c.cli(&refs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(four.join("_summary.json")).unwrap()).unwrap();
    let stage = |s: &serde_json::Value, name: &str| {
        s["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["stage"] == name)
            .unwrap()
            .clone()
    };
    let triples = stage(&summary, "triples");
    let tasks = triples["tasks"].as_array().unwrap();
    let ids: Vec<&str> = tasks.iter().map(|t| t["task"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "stage/triples/shard-00000",
            "stage/triples/shard-00001",
            "stage/triples/shard-00002",
            "stage/triples/shard-00003",
            "stage/triples/merge"
        ]
    );
    let workers: std::collections::BTreeSet<&str> = tasks[..4]
        .iter()
        .map(|t| t["worker"].as_str().unwrap())
        .collect();
    assert!(workers.len() >= 2, "shard tasks all ran on {workers:?}");

    // The same triples, quarantine rows and exports, byte for byte where the file is one.
    for table in ["triples", "quarantine"] {
        let (a, b) = (sorted_rows(&one, table), sorted_rows(&four, table));
        assert!(a == b, "table {table} differs between 1 and 4 tasks");
    }
    assert!(!sorted_rows(&one, "triples").is_empty());
    // The exports hold the same docs and lines; their order follows the documents' parts,
    // which `run.shards` cuts differently.
    let docs = |out: &Path| {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("openie/openie_results.json")).unwrap())
                .unwrap();
        let mut d: Vec<String> = v["docs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.to_string())
            .collect();
        d.sort();
        (d, v["avg_ent_chars"].clone(), v["avg_ent_words"].clone())
    };
    assert!(docs(&one).0.len() > 10);
    assert!(docs(&one) == docs(&four), "the OpenIE exports differ");
    let ras = "openie/ras.jsonl";
    assert!(sorted_lines(&one.join(ras)) == sorted_lines(&four.join(ras)));
    // With the same shards, one task writes the very bytes four tasks and a merge do.
    let same = dir.join("same-shards-one-task");
    let mut set: Vec<String> = at("cache-one");
    set.extend(["run.shards=4".into(), "stages.triples.tasks=1".into()]);
    let refs: Vec<&str> = set.iter().map(String::as_str).collect();
    run_into(&pipeline, &same, &refs);
    for f in ["openie/openie_results.json", "openie/ras.jsonl"] {
        let (a, b) = (
            std::fs::read(same.join(f)).unwrap(),
            std::fs::read(four.join(f)).unwrap(),
        );
        assert!(a.len() > 1000, "{f}: {} bytes", a.len());
        assert!(a == b, "{f} differs between 1 and 4 tasks over 4 shards");
    }
    for table in ["triples", "quarantine", "segments"] {
        let (a, b) = (sorted_rows(&same, table), sorted_rows(&four, table));
        assert!(
            a == b,
            "table {table} differs between 1 and 4 tasks over 4 shards"
        );
    }
    // Every passage was asked once in each run, whatever the task count.
    let one_summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(one.join("_summary.json")).unwrap()).unwrap();
    for counter in ["passages", "triples", "passages.invalid", "llm.calls"] {
        assert_eq!(
            stage(&one_summary, "triples")["counters"][counter],
            triples["counters"][counter],
            "{counter}"
        );
    }
}

/// A multistream dump of `streams` streams of 10 pages each between a header and a footer
/// stream, each compressed on its own, with its `-index.txt` (`offset:page id:title`) beside it.
fn write_multistream_dump(dir: &Path, streams: usize) -> PathBuf {
    use std::io::Write;
    let bz2 = |text: &str| {
        let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(1));
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let mut dump = bz2(concat!(
        "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\" version=\"0.11\" ",
        "xml:lang=\"en\">\n  <siteinfo>\n    <sitename>Test</sitename>\n    ",
        "<dbname>testwiki</dbname>\n  </siteinfo>\n"
    ));
    let mut index = String::new();
    for s in 0..streams {
        let offset = dump.len();
        let mut text = String::new();
        for i in s * 10..s * 10 + 10 {
            index.push_str(&format!("{offset}:{i}:Page {i}\n"));
            let words: String = (0..200)
                .map(|w| format!("w{}x{} ", (i * 7919 + w * 104_729) % 100_003, w % 13))
                .collect();
            text.push_str(&format!(
                "  <page>\n    <title>Page {i}</title>\n    <ns>0</ns>\n    <id>{i}</id>\n    \
                 <revision>\n      <id>{rev}</id>\n      <text xml:space=\"preserve\">\
                 '''Page {i}''' links [[Page {next}]].\n\n== Facts ==\n{{| class=\"wikitable\"\n\
                 ! A !! B\n|-\n| x{i} || {i}\n|}}\n{words}.</text>\n    </revision>\n  </page>\n",
                rev = 1000 + i,
                next = i + 1
            ));
        }
        dump.extend(bz2(&text));
    }
    dump.extend(bz2("</mediawiki>\n"));
    let path = dir.join("testwiki-20240101-pages-articles-multistream.xml.bz2");
    std::fs::write(&path, dump).unwrap();
    std::fs::write(
        dir.join("testwiki-20240101-pages-articles-multistream-index.txt"),
        index,
    )
    .unwrap();
    path
}

/// A multistream dump with its index, cut into byte-range ingest tasks on 3 workers, gives the
/// documents, tables and segments of the same dump read as one task.
#[test]
fn a_multistream_dump_is_read_as_byte_range_tasks_like_one_task() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let dump = write_multistream_dump(dir, 12);
    let size = std::fs::metadata(&dump).unwrap().len();
    let pipeline = dir.join("wiki.toml");
    std::fs::write(
        &pipeline,
        format!(
            "version = 1\nname = \"wiki\"\noutput = \"unused\"\n[run]\nshards = 2\n\
             [[inputs]]\nname = \"wiki\"\nformat = \"mediawiki\"\npaths = [\"{}\"]\n\
             [[stages]]\nkind = \"hseq\"\n",
            dump.display()
        ),
    )
    .unwrap();
    let one = dir.join("one");
    run_into(&pipeline, &one, &["run.split_bytes=0"]);

    let mut c = Cluster::new(dir, &[]);
    c.start_workers(&["w1", "w2", "w3"], &[]);
    let split = dir.join("split");
    let split_bytes = format!("run.split_bytes={}", size / 4);
    let o = c.cli(&[
        "submit",
        pipeline.to_str().unwrap(),
        "--set",
        &split_bytes,
        "--set",
        &format!("output={}", split.display()),
        "--wait",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(split.join("_summary.json")).unwrap()).unwrap();
    let ingest = summary["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "ingest/wiki")
        .unwrap()
        .clone();
    let tasks: Vec<&str> = ingest["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task"].as_str().unwrap())
        .collect();
    assert!(tasks.len() >= 2, "{tasks:?}");
    assert!(
        tasks.iter().all(|t| t.starts_with("ingest/wiki-0000.")),
        "{tasks:?}"
    );
    for table in ["documents", "tables", "segments"] {
        let (a, b) = (sorted_rows(&one, table), sorted_rows(&split, table));
        assert!(a.len() >= 100, "{table}: {} rows", a.len());
        assert!(
            a == b,
            "table {table} differs between one task and byte ranges"
        );
    }
}
