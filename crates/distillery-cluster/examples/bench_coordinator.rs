//! Coordinator scale bench: a `distillery coordinator` process driven by simulated workers
//! polling at 1 Hz, on a job of about 100,000 tasks. Each simulated worker pulls with one free
//! slot and completes a task the moment it gets one (no work), so what is measured is the
//! coordinator: pull latency percentiles, completions, and its CPU from /proc.
//!
//! Baseline, same workers, same process, same run: a `GetJob` of an unknown job — a gRPC round
//! trip through the same server, auth and lock, without scheduling. Ratios are pull / baseline.
//!
//!   cargo run --release -p distillery-cluster --example bench_coordinator -- \
//!       target/release/distillery [workers] [tasks] [levels]
//!
//! `levels` (2 or 3, default 2) splits the tasks evenly: ingest tasks, then an `hseq` stage
//! and (third level) an `export` stage, each of one task per shard (an export merge task
//! follows); each level gets a line of its own (commits/s, pull latency, CPU).
//!
//! A fifth argument `restart` kills the coordinator (SIGKILL) once three quarters of the tasks
//! have committed and starts it again on the same state: the bench reports how long the new
//! process took to serve and to accept its first commit, against the submission (plan and
//! record) of the same job as baseline; the simulated workers register again, as real ones do.
//!
//! When the job has ended, `distillery status` (the CLI, table and JSON) is asked about it.
//!
//! (`scripts/bench-coordinator.sh` builds and runs it.) Linux only (reads /proc).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use distillery_cluster::auth::Token;
use distillery_cluster::client::connect;
use distillery_cluster::{PROTOCOL_VERSION, pb};
use distillery_exec::task::TaskOutput;
use tokio::sync::Mutex;

fn cpu_secs(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// The coordinator's CPU seconds across restarts: those of the processes killed, plus the
/// running one's.
#[derive(Default)]
struct CoordCpu {
    pid: u32,
    before: f64,
}

impl CoordCpu {
    fn secs(m: &std::sync::Mutex<CoordCpu>) -> f64 {
        let c = m.lock().unwrap();
        c.before + cpu_secs(c.pid)
    }
}

fn start_coordinator(bin: &str, dir: &Path, port: u16) -> Child {
    Command::new(bin)
        .args([
            "-q",
            "coordinator",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--token-file")
        .arg(dir.join("token"))
        .args([
            "--lease-secs",
            "30",
            "--heartbeat-ms",
            "1000",
            "--straggler-factor",
            "0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the coordinator")
}

fn peak_rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = args
        .get(1)
        .expect("usage: bench_coordinator DISTILLERY_BIN [workers] [tasks] [levels]");
    let workers: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1000);
    let tasks: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let levels: usize = args
        .get(4)
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
        .clamp(2, 3);
    let restart = args.get(5).is_some_and(|a| a == "restart");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let token = "bench-token-0123456789";
    std::fs::write(dir.join("token"), token).unwrap();
    // The tasks split evenly over the levels: one ingest task per input file, then `hseq`
    // stages of one task per shard. The simulated workers never open the files: they only
    // need to exist.
    let shards = (tasks / levels).clamp(1, 65_536);
    let files = tasks.saturating_sub(shards * (levels - 1)).max(1);
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    for i in 0..files {
        std::fs::write(inputs.join(format!("q-{i:06}.json")), "[]").unwrap();
    }
    let mut pipeline = format!(
        "version = 1\nname = \"bench\"\noutput = \"{}\"\n[run]\nshards = {shards}\n\
         [[inputs]]\nname = \"q\"\nformat = \"hotpotqa\"\npaths = [\"{}/q-*.json\"]\n",
        dir.join("out").display(),
        inputs.display()
    );
    // Each level a stage of one task per shard (a pipeline runs each stage kind once).
    for kind in ["hseq", "export"].iter().take(levels - 1) {
        pipeline.push_str(&format!("[[stages]]\nkind = \"{kind}\"\n"));
        if *kind == "export" {
            pipeline.push_str("options = { formats = [\"ircot\"] }\n");
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut coord = start_coordinator(bin, dir, port);
    let pid = coord.id();
    let coord_cpu = Arc::new(std::sync::Mutex::new(CoordCpu { pid, before: 0.0 }));
    let url = format!("http://127.0.0.1:{port}");
    let token = Token::new(token).unwrap();
    let mut client = connect(&url, token.clone(), None).unwrap();
    // Wait for the server.
    for _ in 0..200 {
        if client.list_jobs(pb::ListJobsRequest {}).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "coordinator pid {pid}; {workers} simulated workers polling at 1 Hz; {levels} levels: \
         {files} ingest tasks, then {shards} tasks a level"
    );

    // --- baseline: GetJob of an unknown job, 1 Hz per worker, 10 s ---
    let base_lat = Arc::new(Mutex::new(Vec::<f64>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for _ in 0..workers {
        let mut c = connect(&url, token.clone(), None).unwrap();
        let (lat, stop) = (base_lat.clone(), stop.clone());
        handles.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(fastrand::u64(0..1000))).await;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let t = Instant::now();
                let _ = c
                    .get_job(pb::GetJobRequest {
                        job_id: "none".into(),
                        ..Default::default()
                    })
                    .await;
                lat.lock().await.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }));
    }
    let (c0, t0) = (cpu_secs(pid), Instant::now());
    tokio::time::sleep(Duration::from_secs(10)).await;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.await;
    }
    let base_cpu = (cpu_secs(pid) - c0) / t0.elapsed().as_secs_f64();
    let mut base = base_lat.lock().await.clone();

    // --- the job ---
    let t_submit = Instant::now();
    let job = client
        .submit_job(pb::SubmitJobRequest {
            pipeline_file: "bench.toml".into(),
            pipeline_text: pipeline,
            overrides: vec![],
        })
        .await
        .unwrap_or_else(|e| {
            let _ = coord.kill();
            panic!("submit: {e}")
        })
        .into_inner()
        .job_id;
    let submit_s = t_submit.elapsed().as_secs_f64();
    let pull_lat = Arc::new(Mutex::new(Vec::<f64>::new()));
    let done_lat = Arc::new(Mutex::new(Vec::<f64>::new()));
    // When each pull was sent and how long it took, and when each commit was accepted and
    // for which level (its task's group): per-level windows, rates and latencies.
    let started = Instant::now();
    let pull_at = Arc::new(Mutex::new(Vec::<(f64, f64)>::new()));
    let commit_at = Arc::new(Mutex::new(Vec::<(f64, String)>::new()));
    let completed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for w in 0..workers {
        let mut c = connect(&url, token.clone(), None).unwrap();
        let (pl, dl, done, stop) = (
            pull_lat.clone(),
            done_lat.clone(),
            completed.clone(),
            stop.clone(),
        );
        let (pa, ca) = (pull_at.clone(), commit_at.clone());
        handles.push(tokio::spawn(async move {
            let id = format!("sim-{w:05}");
            let register = pb::RegisterWorkerRequest {
                protocol_version: PROTOCOL_VERSION,
                worker_id: id.clone(),
                capabilities: Some(pb::Capabilities {
                    slots: 1,
                    ..Default::default()
                }),
            };
            let mut generation = c
                .register_worker(register.clone())
                .await
                .expect("register")
                .into_inner()
                .generation;
            tokio::time::sleep(Duration::from_millis(fastrand::u64(0..1000))).await;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let t = Instant::now();
                let r = match c
                    .pull(pb::PullRequest {
                        worker_id: id.clone(),
                        generation,
                        free_slots: 1,
                        running: vec![],
                        draining: false,
                        // Plain 1 Hz polls: the latency measured is the coordinator's answer.
                        wait_ms: 0,
                    })
                    .await
                {
                    Ok(r) => r,
                    // A restarted coordinator: register again, as a worker does.
                    Err(e) if e.code() == tonic::Code::FailedPrecondition => {
                        if let Ok(r) = c.register_worker(register.clone()).await {
                            generation = r.into_inner().generation;
                        }
                        continue;
                    }
                    Err(_) => continue,
                };
                let ms = t.elapsed().as_secs_f64() * 1e3;
                pl.lock().await.push(ms);
                pa.lock().await.push(((t - started).as_secs_f64(), ms));
                for task in r.into_inner().tasks {
                    let group = match task.task_id.split('/').collect::<Vec<_>>()[..] {
                        ["stage", name, ..] => name.to_string(),
                        _ => "ingest".to_string(),
                    };
                    let out = TaskOutput {
                        dir: task.dir.clone(),
                        ..Default::default()
                    };
                    let t = Instant::now();
                    let ok = c
                        .complete_task(pb::CompleteTaskRequest {
                            worker_id: id.clone(),
                            job_id: task.job_id,
                            task_id: task.task_id,
                            attempt_id: task.attempt_id,
                            generation: task.generation,
                            output_json: serde_json::to_string(&out).unwrap(),
                        })
                        .await
                        .map(|r| r.into_inner().accepted)
                        .unwrap_or(false);
                    dl.lock().await.push(t.elapsed().as_secs_f64() * 1e3);
                    if ok {
                        done.fetch_add(1, Ordering::Relaxed);
                        ca.lock()
                            .await
                            .push((started.elapsed().as_secs_f64(), group));
                    }
                }
            }
        }));
    }
    let (c1, t1) = (CoordCpu::secs(&coord_cpu), Instant::now());
    // The coordinator's CPU seconds, sampled every 250 ms.
    let cpu_at = Arc::new(Mutex::new(vec![((t1 - started).as_secs_f64(), c1)]));
    let sampler = {
        let (cpu_at, stop, coord_cpu) = (cpu_at.clone(), stop.clone(), coord_cpu.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let secs = CoordCpu::secs(&coord_cpu);
                cpu_at
                    .lock()
                    .await
                    .push((started.elapsed().as_secs_f64(), secs));
            }
        })
    };
    let mut last = Instant::now();
    let total = (files + shards * (levels - 1)) as u64;
    // (commits on record at the kill, when the new process started, when it served, when it
    // accepted its first commit)
    let mut restarted: Option<(u64, Instant, Option<f64>, Option<f64>)> = None;
    let state = loop {
        if restart && restarted.is_none() && completed.load(Ordering::Relaxed) >= total * 3 / 4 {
            let before = CoordCpu::secs(&coord_cpu);
            let _ = coord.kill();
            let _ = coord.wait();
            let on_record = completed.load(Ordering::Relaxed);
            let at = Instant::now();
            coord = start_coordinator(bin, dir, port);
            *coord_cpu.lock().unwrap() = CoordCpu {
                pid: coord.id(),
                before,
            };
            println!("  killed the coordinator with {on_record} commits on record; started again");
            restarted = Some((on_record, at, None, None));
        }
        if let Some((on_record, at, serving, first)) = &mut restarted {
            if serving.is_none() {
                if client.list_jobs(pb::ListJobsRequest {}).await.is_ok() {
                    *serving = Some(at.elapsed().as_secs_f64());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            if first.is_none() {
                if completed.load(Ordering::Relaxed) > *on_record {
                    *first = Some(at.elapsed().as_secs_f64());
                } else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let s = client
            .get_job(pb::GetJobRequest {
                job_id: job.clone(),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner());
        if let Ok(s) = &s
            && s.state != pb::JobState::Running as i32
        {
            break s.state;
        }
        if last.elapsed() > Duration::from_secs(15) {
            last = Instant::now();
            println!(
                "  {:.0} s: {} tasks committed",
                t1.elapsed().as_secs_f64(),
                completed.load(Ordering::Relaxed)
            );
        }
        if t1.elapsed() > Duration::from_secs(1800) {
            break -1;
        }
    };
    let wall = t1.elapsed().as_secs_f64();
    let cpu = CoordCpu::secs(&coord_cpu) - c1;
    let pid = coord.id();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.await;
    }
    let _ = sampler.await;
    let mut pulls = pull_lat.lock().await.clone();
    let mut dones = done_lat.lock().await.clone();
    let n = completed.load(Ordering::Relaxed);
    println!(
        "job {job}: state {state} ({}), {n} tasks committed in {wall:.1} s = {:.0} tasks/s; submit (plan + record) {submit_s:.2} s",
        if state == pb::JobState::Succeeded as i32 {
            "succeeded"
        } else {
            "NOT succeeded"
        },
        n as f64 / wall
    );
    println!(
        "pull latency ms ({} pulls): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        pulls.len(),
        pct(&mut pulls, 0.5),
        pct(&mut pulls, 0.9),
        pct(&mut pulls, 0.99),
        pct(&mut pulls, 1.0)
    );
    println!(
        "complete latency ms ({}): p50 {:.2}  p99 {:.2}",
        dones.len(),
        pct(&mut dones, 0.5),
        pct(&mut dones, 0.99)
    );
    println!(
        "baseline GetJob(unknown) latency ms ({}): p50 {:.2}  p99 {:.2}",
        base.len(),
        pct(&mut base, 0.5),
        pct(&mut base, 0.99)
    );
    println!(
        "ratio pull/baseline: p50 {:.2}x  p99 {:.2}x",
        pct(&mut pulls, 0.5) / pct(&mut base, 0.5).max(1e-9),
        pct(&mut pulls, 0.99) / pct(&mut base, 0.99).max(1e-9)
    );
    println!(
        "coordinator CPU: {:.1}% of one core during the job ({cpu:.1} s over {wall:.1} s); {:.1}% during the baseline; peak RSS {:.0} MB",
        100.0 * cpu / wall,
        100.0 * base_cpu,
        peak_rss_mb(pid)
    );
    per_level(
        &commit_at.lock().await,
        &pull_at.lock().await,
        &cpu_at.lock().await,
    );
    if let Some((on_record, _, serving, first)) = restarted {
        let (serving, first) = (serving.unwrap_or(f64::NAN), first.unwrap_or(f64::NAN));
        println!(
            "restart with {on_record} of {total} tasks committed: serving {serving:.2} s after the start, first commit accepted {first:.2} s after it; \
             baseline submit (plan + record) {submit_s:.2} s; ratio {:.2}x",
            first / submit_s.max(1e-9)
        );
    }
    ask_status(bin, dir, &url, &job);
    let _ = coord.kill();
    let _ = coord.wait();
}

/// One line per level: its window (first to last commit), commits/s, the latency of the
/// pulls sent in the window, and the coordinator's CPU over it.
fn per_level(commits: &[(f64, String)], pulls: &[(f64, f64)], cpu: &[(f64, f64)]) {
    let mut order: Vec<&str> = Vec::new();
    for (_, g) in commits {
        if !order.contains(&g.as_str()) {
            order.push(g);
        }
    }
    let cpu_at = |t: f64| {
        cpu.iter()
            .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
            .map_or(0.0, |x| x.1)
    };
    for g in order {
        let times: Vec<f64> = commits
            .iter()
            .filter(|(_, x)| x == g)
            .map(|(t, _)| *t)
            .collect();
        let (a, b) = (times[0], times[times.len() - 1]);
        let span = (b - a).max(1e-3);
        let mut lat: Vec<f64> = pulls
            .iter()
            .filter(|(t, _)| *t >= a && *t <= b)
            .map(|(_, ms)| *ms)
            .collect();
        let used = (cpu_at(b) - cpu_at(a)) / span;
        println!(
            "level {g}: {} commits in {span:.1} s = {:.0} commits/s; pulls {}: p50 {:.2} ms  p99 {:.2} ms; coordinator CPU {:.0}% of one core",
            times.len(),
            times.len() as f64 / span,
            lat.len(),
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99),
            100.0 * used
        );
    }
}

/// `distillery status` on the ended job, as a user would ask: its table and its JSON (every
/// task, fetched in pages), how long each took and how big the answer was.
fn ask_status(bin: &str, dir: &Path, url: &str, job: &str) {
    for format in ["table", "json"] {
        let t = Instant::now();
        let out = Command::new(bin)
            .args([
                "-q",
                "status",
                job,
                "--coordinator",
                url,
                "--format",
                format,
            ])
            .arg("--token-file")
            .arg(dir.join("token"))
            .output()
            .expect("run distillery status");
        let secs = t.elapsed().as_secs_f64();
        let text = String::from_utf8_lossy(&out.stdout);
        let detail = if format == "json" {
            serde_json::from_str::<serde_json::Value>(&text).map_or_else(
                |e| format!("unreadable JSON: {e}"),
                |v| {
                    let tasks: usize = v
                        .pointer("/stages")
                        .or_else(|| v.pointer("/0/stages"))
                        .and_then(|s| s.as_array())
                        .map_or(0, |st| {
                            st.iter()
                                .map(|s| s["tasks"].as_array().map_or(0, |t| t.len()))
                                .sum()
                        });
                    format!("{tasks} task rows")
                },
            )
        } else {
            text.lines().next().unwrap_or("").to_string()
        };
        println!(
            "distillery status --format {format}: {} in {secs:.2} s, {} bytes; {detail}{}",
            out.status,
            out.stdout.len(),
            if out.status.success() {
                String::new()
            } else {
                format!("; stderr: {}", String::from_utf8_lossy(&out.stderr).trim())
            }
        );
    }
}
