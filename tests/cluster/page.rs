//! The coordinator's HTTP port as people and Prometheus see it: the job page in a real
//! headless browser (Debian's `chromium`) while a job runs on two worker processes and after
//! it ended, its numbers checked against `_summary.json`, with screenshots kept under
//! `target/test-artefacts/`; `/metrics` parsed by the Prometheus project's Python parser; and
//! the port answering while 1,000 idle connections are open.

use super::*;
use distillery_testkit::browser::{artefact, browse, chromium};
use distillery_testkit::fault_server::FaultServer;
use distillery_testkit::stand_in::teacher;

/// The `data-value` of the cell of class `class` in the stage row of `stage`.
fn stage_value(dom: &str, stage: &str, class: &str) -> Option<u64> {
    let row_start = dom.find(&format!("data-stage=\"{stage}\""))?;
    let row = &dom[row_start..row_start + dom[row_start..].find("</tr>")?];
    let cell = row.find(&format!("class=\"{class}\" data-value=\""))?;
    let rest = &row[cell + class.len() + 21..];
    rest[..rest.find('"')?].parse().ok()
}

#[test]
fn the_job_page_shows_a_running_and_a_finished_job_in_a_browser() {
    let Some(browser) = chromium() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pipeline = write_pipeline(dir, 4, 150);
    let out = dir.join("out");
    let mut c = Cluster::new(dir, &[]);
    c.start_workers(
        &["w1", "w2"],
        &[("DISTILLERY_FAULTS", "delay:ingest/:1500")],
    );
    let job = c.submit(&pipeline, &out);
    c.wait_for(&job, "a first commit", |st| {
        st.contains("ingest") && !st.contains(" 0/") && st.contains(" running ")
    });
    let url = format!("http://127.0.0.1:{}/jobs/{job}", c.metrics_port);

    // Mid-job: the page reloads itself, shows the phase, running attempts on the timeline
    // and both workers.
    let dom = browse(&browser, &url, &artefact("job-page-running.png"));
    assert!(dom.contains("http-equiv=\"refresh\""), "{dom}");
    let state = &dom[dom.find("id=\"job-state\"").unwrap()..];
    assert!(
        state.starts_with("id=\"job-state\">ingesting")
            || state.starts_with("id=\"job-state\">running its stages"),
        "{}",
        &state[..80.min(state.len())]
    );
    assert!(dom.contains("class=\"attempt committed\""), "{dom}");
    assert!(
        dom.contains("<td>w1</td>") && dom.contains("<td>w2</td>"),
        "{dom}"
    );
    assert!(dom.contains("data-stage=\"ingest/"), "{dom}");
    let list = browse(
        &browser,
        &format!("http://127.0.0.1:{}/", c.metrics_port),
        &artefact("job-list.png"),
    );
    assert!(list.contains(&format!("href=\"/jobs/{job}\"")), "{list}");

    let end = c.wait_end(&job);
    assert!(end.contains(" succeeded "), "{end}");

    // After the end: no reloading, and every stage's numbers as `_summary.json` says.
    let dom = browse(&browser, &url, &artefact("job-page-finished.png"));
    assert!(!dom.contains("http-equiv=\"refresh\""));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("_summary.json")).unwrap()).unwrap();
    let stages = summary["stages"].as_array().unwrap();
    assert!(stages.len() >= 3, "{summary}");
    for st in stages {
        let name = st["stage"].as_str().unwrap();
        for (class, key) in [
            ("records-in", "records_in"),
            ("records-out", "records_out"),
            ("bytes-out", "bytes_out"),
            ("quarantined", "quarantined"),
        ] {
            assert_eq!(
                stage_value(&dom, name, class),
                st[key].as_u64(),
                "stage {name}, {key}"
            );
        }
        let tasks = st["tasks"].as_array().unwrap().len() as u64;
        assert_eq!(stage_value(&dom, name, "done"), Some(tasks), "stage {name}");
        assert_eq!(stage_value(&dom, name, "waiting"), Some(0), "stage {name}");
    }

    // A restarted coordinator shows the ended job from its records.
    let mut coord = c.coordinator.take().unwrap();
    coord.kill().unwrap();
    coord.wait().unwrap();
    c.start_coordinator();
    let dom = browse(&browser, &url, &artefact("job-page-after-restart.png"));
    assert!(dom.contains("final record"), "{dom}");
    for st in stages {
        let name = st["stage"].as_str().unwrap();
        assert_eq!(
            stage_value(&dom, name, "records-out"),
            st["records_out"].as_u64(),
            "stage {name} after a restart"
        );
    }
    assert!(dom.contains("class=\"attempt committed\""), "{dom}");
}

/// `/metrics` through Python's `prometheus_client` text parser: the families and their types.
fn parse_metrics(text: &str) -> Option<BTreeMap<String, String>> {
    let script = "import sys\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        for f in text_string_to_metric_families(sys.stdin.read()):\n    print(f.name, f.type)\n";
    let mut child = match Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("python3: {e}"),
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if err.contains("No module named 'prometheus_client'") {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but prometheus_client is not installed"
        );
        eprintln!("skipping the parse: pip install prometheus_client");
        return None;
    }
    assert!(o.status.success(), "parse failed: {err}\n{text}");
    Some(
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
    )
}

#[test]
fn metrics_parse_hold_histograms_and_answer_past_1000_idle_connections() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pipeline = write_pipeline(dir, 2, 100);
    let mut c = Cluster::new(dir, &[]);
    // One worker with its own metrics port: the teacher's and the worker's families.
    let worker_port = free_port();
    let mut w = bin();
    w.arg("worker")
        .args(["--coordinator", &c.url(), "--worker-id", "w1"])
        .args(["--metrics-listen", &format!("127.0.0.1:{worker_port}")])
        .arg("--token-file")
        .arg(&c.token_file)
        .stdout(Stdio::null())
        .stderr(c.log("w1"));
    c.workers.push(("w1".into(), w.spawn().unwrap()));
    let job = c.submit(&pipeline, &dir.join("out"));
    let end = c.wait_end(&job);
    assert!(end.contains(" succeeded "), "{end}");

    // 1,000 connections that never send a request: the port still answers at once. (This
    // process holds them: its open-files limit raised as the binary raises its own.)
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let (Some(cur), Some(max)) = (nofile.current, nofile.maximum)
        && cur < max
    {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(max),
                maximum: Some(max),
            },
        );
    }
    let idle: Vec<std::net::TcpStream> = (0..1000)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", c.metrics_port)).unwrap())
        .collect();
    let started = Instant::now();
    let m = c.metrics();
    assert!(
        m.starts_with("HTTP/1.1 200"),
        "no answer with 1,000 idle connections open: {m:?}"
    );
    eprintln!(
        "/metrics answered in {:.3} s with {} idle connections open",
        started.elapsed().as_secs_f64(),
        idle.len()
    );
    let body = &m[m.find("\r\n\r\n").unwrap() + 4..];
    assert!(
        metric(body, "distillery_coordinator_commits_total") >= 1.0,
        "{body}"
    );
    let stage_seconds = "distillery_stage_task_seconds_count{stage=\"label\"}";
    assert!(metric(body, stage_seconds) >= 1.0, "{body}");
    drop(idle);

    let worker = http_get(worker_port, "/metrics").unwrap();
    let worker = &worker[worker.find("\r\n\r\n").unwrap() + 4..];
    let Some(families) = parse_metrics(body) else {
        return;
    };
    for (name, kind) in [
        ("distillery_stage_task_seconds", "histogram"),
        ("distillery_stage_queue_wait_seconds", "histogram"),
        ("distillery_stage_records", "counter"),
        ("distillery_stage_bytes", "counter"),
        ("distillery_stage_quarantined", "counter"),
        ("distillery_coordinator_tasks", "gauge"),
    ] {
        assert_eq!(families.get(name).map(String::as_str), Some(kind), "{name}");
    }
    let families = parse_metrics(worker).unwrap();
    for (name, kind) in [
        ("distillery_worker_task_seconds", "histogram"),
        ("distillery_worker_tasks", "counter"),
        ("distillery_teacher_prompt_tokens", "counter"),
    ] {
        assert_eq!(
            families.get(name).map(String::as_str),
            Some(kind),
            "{name}: {worker}"
        );
    }

    // A teacher stage (the triples pipeline against the stand-in teacher): the worker's
    // request and cache lookup histograms fill, and the coordinator's teacher counters equal
    // the summary's.
    if !repo().join("../shared/data/hotpotqa").exists() {
        eprintln!("skipping the teacher half: ../shared/data is absent");
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![], teacher()));
    let out = dir.join("triples");
    let o = c.cli(&[
        "submit",
        repo().join("pipelines/triples.toml").to_str().unwrap(),
        "--set",
        &format!("llm.base_url={}", server.url),
        "--set",
        "llm.model=stand-in",
        "--set",
        &format!("llm.cache={}", dir.join("cache").display()),
        "--set",
        &format!("output={}", out.display()),
        "--wait",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("_summary.json")).unwrap()).unwrap();
    let triples = summary["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "triples")
        .unwrap();
    let calls = triples["counters"]["llm.calls"].as_u64().unwrap();
    assert!(calls > 0, "{triples}");
    let m = c.metrics();
    assert_eq!(
        metric(
            &m,
            "distillery_stage_teacher_calls_total{stage=\"triples\"}"
        ),
        calls as f64,
        "{m}"
    );
    let worker = http_get(worker_port, "/metrics").unwrap();
    let worker = &worker[worker.find("\r\n\r\n").unwrap() + 4..];
    let families = parse_metrics(worker).unwrap();
    for name in [
        "distillery_teacher_request_seconds",
        "distillery_teacher_cache_lookup_seconds",
    ] {
        assert_eq!(
            families.get(name).map(String::as_str),
            Some("histogram"),
            "{name}: {worker}"
        );
    }
    let requests = "distillery_teacher_request_seconds_count{endpoint=\"chat\",outcome=\"ok\"}";
    assert!(metric(worker, requests) >= calls as f64, "{worker}");

    // Every series the Grafana dashboard of k8s/ plots is one the processes export.
    let exported: std::collections::BTreeSet<&str> = m
        .lines()
        .chain(worker.lines())
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let dash: serde_json::Value = serde_json::from_slice(
        &std::fs::read(repo().join("k8s/components/monitoring/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut plotted = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (at, _) in expr.match_indices("distillery_") {
                let name: String = expr[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let series = ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(&name);
                assert!(
                    exported.contains(series),
                    "the dashboard plots {name}, which nothing exports ({expr})"
                );
                plotted += 1;
            }
        }
    }
    assert!(plotted >= 20, "{plotted}");
}
