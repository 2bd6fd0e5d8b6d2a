//! The coordinator's tests through its service: scheduling by GPUs, stragglers, retries,
//! output locks, commits, and restarts (locks taken again, the planned files kept).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use distillery_exec::task::TaskOutput;

use super::*;

pub(super) fn pipeline(dir: &std::path::Path, gpus: u32) -> String {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/quickstart");
    format!(
        "version = 1\nname = \"t\"\noutput = \"{}\"\n[run]\nshards = 2\n\
         [[inputs]]\nname = \"hotpot\"\nformat = \"hotpotqa\"\npaths = [\"{}\"]\n\
         [[inputs]]\nname = \"kb\"\nformat = \"metaqa-kb\"\npaths = [\"{}\"]\n\
         [[stages]]\nkind = \"hseq\"\ngpus = {gpus}\n",
        dir.join("out").display(),
        data.join("hotpot.json").display(),
        data.join("kb.txt").display()
    )
}

async fn service(dir: &std::path::Path, cfg: CoordinatorConfig) -> CoordinatorService {
    CoordinatorService::start(&dir.join("state").display().to_string(), cfg)
        .await
        .unwrap()
}

fn register(svc: &CoordinatorService, id: &str, gpus: u32) {
    let mut inner = svc.lock();
    inner.workers.insert(
        id.to_string(),
        WorkerRt {
            caps: pb::Capabilities {
                slots: 4,
                gpus,
                ..Default::default()
            },
            last_seen: Instant::now(),
            last_seen_ms: 0,
            draining: false,
            attempts: HashSet::new(),
            abandon: Vec::new(),
        },
    );
}

/// A pull by a worker that runs `running` (attempts it must list, or lose them).
fn pull_running(
    svc: &CoordinatorService,
    id: &str,
    free: u32,
    running: &[pb::Task],
) -> Vec<pb::Task> {
    let running = running
        .iter()
        .map(|t| pb::AttemptProgress {
            job_id: t.job_id.clone(),
            task_id: t.task_id.clone(),
            attempt_id: t.attempt_id.clone(),
            records: 0,
            bytes: 0,
        })
        .collect();
    svc.pull_inner(pb::PullRequest {
        worker_id: id.to_string(),
        generation: svc.generation,
        free_slots: free,
        running,
        draining: false,
        wait_ms: 0,
    })
    .unwrap()
    .tasks
}

fn pull(svc: &CoordinatorService, id: &str, free: u32) -> Vec<pb::Task> {
    svc.pull_inner(pb::PullRequest {
        worker_id: id.to_string(),
        generation: svc.generation,
        free_slots: free,
        running: Vec::new(),
        draining: false,
        wait_ms: 0,
    })
    .unwrap()
    .tasks
}

async fn complete(svc: &CoordinatorService, id: &str, t: &pb::Task) -> pb::CompleteTaskResponse {
    let out = TaskOutput {
        dir: t.dir.clone(),
        ..Default::default()
    };
    svc.complete_inner(pb::CompleteTaskRequest {
        worker_id: id.to_string(),
        job_id: t.job_id.clone(),
        task_id: t.task_id.clone(),
        attempt_id: t.attempt_id.clone(),
        generation: t.generation,
        output_json: serde_json::to_string(&out).unwrap(),
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_stage_that_needs_a_gpu_goes_only_to_a_worker_with_one() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    svc.submit("t.toml", &pipeline(tmp.path(), 1), &[])
        .await
        .unwrap();
    register(&svc, "cpu", 0);
    register(&svc, "gpu", 1);
    let ingest = pull(&svc, "cpu", 4);
    assert_eq!(
        ingest.len(),
        2,
        "the two ingest tasks, nothing above them yet"
    );
    assert!(pull_running(&svc, "cpu", 2, &ingest).is_empty());
    for t in &ingest {
        let r = complete(&svc, "cpu", t).await;
        assert!(r.accepted, "{}", r.reason);
    }
    assert!(pull(&svc, "cpu", 4).is_empty(), "hseq needs a GPU");
    let hseq = pull(&svc, "gpu", 4);
    let ids: Vec<&str> = hseq.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["stage/hseq/shard-00000", "stage/hseq/shard-00001"]);
}

#[tokio::test]
async fn a_straggler_gets_a_copy_and_the_first_commit_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = CoordinatorConfig {
        straggler_factor: 2.0,
        straggler_min: Duration::from_millis(50),
        ..CoordinatorConfig::default()
    };
    let svc = service(tmp.path(), cfg).await;
    svc.submit("t.toml", &pipeline(tmp.path(), 0), &[])
        .await
        .unwrap();
    register(&svc, "a", 0);
    register(&svc, "b", 0);
    let first = pull(&svc, "a", 2);
    assert!(complete(&svc, "a", &first[0]).await.accepted);
    // The other ingest task runs on: after 4x the median it is copied to b.
    tokio::time::sleep(Duration::from_millis(120)).await;
    svc.tick();
    let copy = pull(&svc, "b", 1);
    assert_eq!(copy.len(), 1);
    assert_eq!(copy[0].task_id, first[1].task_id);
    assert_ne!(copy[0].attempt_id, first[1].attempt_id);
    assert!(complete(&svc, "b", &copy[0]).await.accepted);
    let late = complete(&svc, "a", &first[1]).await;
    assert!(!late.accepted);
    assert_eq!(late.reason, "attempt is abandoned");
    assert!(
        svc.metrics()
            .contains("distillery_coordinator_straggler_copies_total 1")
    );
}

#[tokio::test]
async fn expired_leases_are_retried_then_the_job_fails_with_a_report() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = CoordinatorConfig {
        lease: Duration::from_millis(30),
        backoff: Duration::from_millis(1),
        max_attempts: 2,
        ..CoordinatorConfig::default()
    };
    let svc = service(tmp.path(), cfg).await;
    let job = svc
        .submit("t.toml", &pipeline(tmp.path(), 0), &[])
        .await
        .unwrap();
    register(&svc, "a", 0);
    for _ in 0..2 {
        assert_eq!(pull(&svc, "a", 2).len(), 2);
        tokio::time::sleep(Duration::from_millis(50)).await;
        svc.tick();
        tokio::time::sleep(Duration::from_millis(5)).await;
        svc.tick();
    }
    let inner = svc.lock();
    let st = svc.status_of(&inner, &job, status::TaskPage::NONE).unwrap();
    assert_eq!(st.state, pb::JobState::Failed as i32);
    assert!(
        st.error.contains("failed after 2 attempt(s)"),
        "{}",
        st.error
    );
    assert_eq!(st.error.matches("lease expired").count(), 2, "{}", st.error);
}

#[tokio::test]
async fn one_job_writes_an_output_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    let text = pipeline(tmp.path(), 0);
    let first = svc.submit("t.toml", &text, &[]).await.unwrap();
    let lock = tmp
        .path()
        .join("out")
        .join(distillery_exec::lock::LOCK_FILE);
    assert!(lock.exists());
    // A second job into the same output is refused as invalid, naming the holder.
    match svc.submit("t.toml", &text, &[]).await {
        Err(ClusterError::Invalid(m)) => {
            assert!(m.contains(&format!("in use by job {first}")), "{m}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(svc.lock().jobs.len(), 1, "the refused job was not recorded");
    // Once the first job ended the output is free, even before its lock is given back.
    svc.cancel(&first);
    let second = svc.submit("t.toml", &text, &[]).await.unwrap();
    let held: distillery_exec::lock::OutputLock =
        serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
    assert_eq!(held.job, second);
    // Ending it gives the lock back.
    svc.cancel(&second);
    svc.after_jobs_done().await;
    assert!(!lock.exists());
}

#[tokio::test]
async fn a_restarted_coordinator_takes_the_locks_of_resumed_jobs_again() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    let job = svc
        .submit("t.toml", &pipeline(tmp.path(), 0), &[])
        .await
        .unwrap();
    let lock = tmp
        .path()
        .join("out")
        .join(distillery_exec::lock::LOCK_FILE);
    let read = || -> distillery_exec::lock::OutputLock {
        serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap()
    };
    // As if the coordinator had run in another pod: its process is gone with it.
    let mut before = read();
    before.host = "old-pod".into();
    std::fs::write(&lock, serde_json::to_vec(&before).unwrap()).unwrap();
    let svc2 = service(tmp.path(), CoordinatorConfig::default()).await;
    let now = read();
    assert_eq!(now.job, job);
    assert_ne!(
        now.host, "old-pod",
        "the resumed job holds it in this process's name"
    );
    assert_eq!(
        svc2.lock().jobs[&job].phase.job_state(),
        pb::JobState::Running,
        "resumed"
    );
    // Another job took the output while no coordinator ran: the resumed job fails.
    let mut other = read();
    other.job = "someone-else".into();
    other.host = "elsewhere".into();
    std::fs::write(&lock, serde_json::to_vec(&other).unwrap()).unwrap();
    let svc3 = service(tmp.path(), CoordinatorConfig::default()).await;
    let st = {
        let inner = svc3.lock();
        svc3.status_of(&inner, &job, status::TaskPage::NONE)
            .unwrap()
    };
    assert_eq!(st.state, pb::JobState::Failed as i32);
    assert!(
        st.error.contains("in use by job someone-else"),
        "{}",
        st.error
    );
    svc3.after_jobs_done().await;
    assert_eq!(
        read().job,
        "someone-else",
        "another job's lock is left alone"
    );
}

#[tokio::test]
async fn an_output_that_is_a_file_is_an_invalid_job() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    std::fs::write(tmp.path().join("out"), b"a file").unwrap();
    match svc.submit("t.toml", &pipeline(tmp.path(), 0), &[]).await {
        Err(ClusterError::Invalid(m)) => assert!(m.contains("out: not a directory"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_repeated_completion_is_accepted_and_committed_files_are_never_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    svc.submit("t.toml", &pipeline(tmp.path(), 0), &[])
        .await
        .unwrap();
    register(&svc, "a", 0);
    let tasks = pull(&svc, "a", 2);
    let out = tmp.path().join("out");
    let marker = out.join(&tasks[0].dir).join("kept");
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    std::fs::write(&marker, b"x").unwrap();
    assert!(complete(&svc, "a", &tasks[0]).await.accepted);
    // The answer was lost and the worker reports again: still accepted, one commit.
    assert!(complete(&svc, "a", &tasks[0]).await.accepted);
    assert!(
        svc.metrics()
            .contains("distillery_coordinator_commits_total 1")
    );
    // A coordinator restarted on the same state refuses the old generation's report but
    // leaves its files: the reloaded commit record points at them.
    let svc2 = service(tmp.path(), CoordinatorConfig::default()).await;
    let r = complete(&svc2, "a", &tasks[0]).await;
    assert!(!r.accepted);
    assert!(r.reason.starts_with("stale generation"), "{}", r.reason);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(marker.exists());
    let inner = svc2.lock();
    let job = inner.jobs.values().next().expect("resumed");
    assert_eq!(job.left, job.tasks.len() - 1, "the commit was reloaded");
}

#[tokio::test]
async fn a_restarted_coordinator_runs_the_files_planned_at_submission() {
    let tmp = tempfile::tempdir().unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/quickstart");
    let inputs = tmp.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    std::fs::copy(data.join("hotpot.json"), inputs.join("a.json")).unwrap();
    // The label stage's evaluation files are planned too.
    let evals = tmp.path().join("evals");
    std::fs::create_dir(&evals).unwrap();
    std::fs::copy(data.join("hotpot.json"), evals.join("dev.json")).unwrap();
    let text = format!(
        "version = 1\nname = \"t\"\noutput = \"{}\"\n[run]\nshards = 2\n\
         [[inputs]]\nname = \"hotpot\"\nformat = \"hotpotqa\"\npaths = [\"{}\"]\n\
         [[stages]]\nkind = \"hseq\"\n\
         [[stages]]\nkind = \"label\"\ninputs = [\"hotpot\"]\n\
         options = {{ decontaminate = [\"{}\"] }}\n",
        tmp.path().join("out").display(),
        inputs.join("*.json").display(),
        evals.join("*.json").display()
    );
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    let job = svc.submit("t.toml", &text, &[]).await.unwrap();
    let tasks = |svc: &CoordinatorService| -> Vec<distillery_exec::task::TaskDef> {
        svc.lock().jobs[&job]
            .tasks
            .iter()
            .map(|t| t.def.clone())
            .collect()
    };
    let planned = tasks(&svc);
    let location = |defs: &[distillery_exec::task::TaskDef]| {
        defs[0]
            .file
            .as_ref()
            .expect("an ingest task")
            .location
            .clone()
    };
    assert!(location(&planned).ends_with("a.json"));
    let side = |defs: &[distillery_exec::task::TaskDef]| -> Vec<String> {
        let label: Vec<_> = defs.iter().filter(|d| d.group == "label").collect();
        assert!(label.len() >= 2, "shard tasks and a merge");
        label
            .iter()
            .filter(|d| matches!(d.kind, distillery_exec::task::TaskKind::Stage { .. }))
            .flat_map(|d| d.side.iter().map(|f| f.location.clone()))
            .collect()
    };
    let planned_side = side(&planned);
    assert_eq!(
        planned_side.len(),
        2,
        "one file for each of the 2 shard tasks"
    );
    assert!(planned_side.iter().all(|l| l.ends_with("dev.json")));
    // The globs match other files now, and no longer the ones planned.
    std::fs::copy(data.join("hotpot.json"), inputs.join("b.json")).unwrap();
    std::fs::remove_file(inputs.join("a.json")).unwrap();
    std::fs::copy(data.join("hotpot.json"), evals.join("test.json")).unwrap();
    std::fs::remove_file(evals.join("dev.json")).unwrap();
    let svc2 = service(tmp.path(), CoordinatorConfig::default()).await;
    assert_eq!(
        svc2.lock().jobs[&job].phase.job_state(),
        pb::JobState::Running,
        "resumed"
    );
    assert_eq!(tasks(&svc2), planned, "the tasks planned at submission");
    assert_eq!(side(&tasks(&svc2)), planned_side);
    // A record from before the files were kept: the inputs are resolved again.
    let rec = tmp.path().join(format!("state/jobs/{job}/job.json"));
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&rec).unwrap()).unwrap();
    assert!(v.as_object_mut().unwrap().remove("files").is_some());
    assert!(v.as_object_mut().unwrap().remove("side").is_some());
    std::fs::write(&rec, serde_json::to_vec(&v).unwrap()).unwrap();
    let svc3 = service(tmp.path(), CoordinatorConfig::default()).await;
    let replanned = tasks(&svc3);
    assert_eq!(replanned.len(), planned.len());
    assert!(location(&replanned).ends_with("b.json"), "planned again");
    assert!(side(&replanned).iter().all(|l| l.ends_with("test.json")));
}

/// A pull with a free slot that may be held for a heartbeat (a long poll), in the
/// background: its tasks and when it was answered.
fn held_pull(
    svc: &CoordinatorService,
    id: &'static str,
) -> tokio::task::JoinHandle<(Vec<pb::Task>, Instant)> {
    use crate::pb::coordinator_server::Coordinator;
    let svc = svc.clone();
    tokio::spawn(async move {
        let req = pb::PullRequest {
            worker_id: id.to_string(),
            generation: svc.generation,
            free_slots: 1,
            running: Vec::new(),
            draining: false,
            wait_ms: svc.cfg.heartbeat.as_millis() as u32,
        };
        let got = svc.pull(tonic::Request::new(req)).await.unwrap();
        (got.into_inner().tasks, Instant::now())
    })
}

/// Idle workers hold their pulls (long polls): when the ingest level commits, the next level's
/// tasks go to the waiting workers at once, one each, instead of a heartbeat later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_level_reaches_idle_workers_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    let heartbeat = svc.cfg.heartbeat;
    svc.submit("t.toml", &pipeline(tmp.path(), 0), &[])
        .await
        .unwrap();
    for w in ["a", "b", "c"] {
        register(&svc, w, 0);
    }
    let ingest = pull(&svc, "a", 4);
    assert_eq!(ingest.len(), 2);
    let wait = |id: &'static str| held_pull(&svc, id);
    let (b, c) = (wait("b"), wait("c"));
    // Both are held: nothing is ready above the running ingest tasks.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!b.is_finished() && !c.is_finished());
    let mut committed = Instant::now();
    for t in &ingest {
        assert!(complete(&svc, "a", t).await.accepted);
        committed = Instant::now();
    }
    let mut ids = Vec::new();
    for (w, h) in [("b", b), ("c", c)] {
        let (tasks, at) = h.await.unwrap();
        let after = at.saturating_duration_since(committed);
        eprintln!(
            "{w}: {} task(s) {:.1} ms after the level was ready",
            tasks.len(),
            after.as_secs_f64() * 1e3
        );
        // Answered on the wake-up, not when its wait ran out.
        assert!(after < heartbeat / 2, "{w} waited {after:?}");
        assert_eq!(tasks.len(), 1, "{w}");
        ids.push(tasks[0].task_id.clone());
    }
    ids.sort();
    assert_eq!(ids, ["stage/hseq/shard-00000", "stage/hseq/shard-00001"]);
    // A held pull with nothing to give answers when its wait runs out, empty.
    let t0 = Instant::now();
    let (tasks, _) = wait("b").await.unwrap();
    assert!(tasks.is_empty() && t0.elapsed() >= heartbeat);
}

/// A status is small for a job of any size: per-stage counts by default, its task rows in
/// pages that together list every task once, in plan order.
#[tokio::test]
async fn a_status_lists_tasks_in_pages_and_stays_small_without_them() {
    use prost::Message;
    let tmp = tempfile::tempdir().unwrap();
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    let inputs = tmp.path().join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    for i in 0..2000 {
        std::fs::write(inputs.join(format!("q-{i:05}.json")), "[]").unwrap();
    }
    let text = format!(
        "version = 1\nname = \"t\"\noutput = \"{}\"\n[run]\nshards = 2000\n\
         [[inputs]]\nname = \"q\"\nformat = \"hotpotqa\"\npaths = [\"{}/q-*.json\"]\n\
         [[stages]]\nkind = \"hseq\"\n",
        tmp.path().join("out").display(),
        inputs.display()
    );
    let job = svc.submit("t.toml", &text, &[]).await.unwrap();
    let inner = svc.lock();
    let brief = svc.status_of(&inner, &job, status::TaskPage::NONE).unwrap();
    assert_eq!(brief.tasks_total, 4000);
    assert_eq!(brief.task_next, 0);
    assert!(brief.stages.iter().all(|s| s.task_list.is_empty()));
    assert_eq!(brief.stages.iter().map(|s| s.tasks).sum::<u32>(), 4000);
    assert!(brief.encoded_len() < 4096, "{} bytes", brief.encoded_len());
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let page = status::TaskPage {
            offset,
            limit: 1500,
        };
        let s = svc.status_of(&inner, &job, page).unwrap();
        seen.extend(
            s.stages
                .iter()
                .flat_map(|st| st.task_list.iter().map(|t| t.task.clone())),
        );
        if s.task_next == 0 {
            break;
        }
        offset = s.task_next;
    }
    let planned: Vec<String> = inner.jobs[&job]
        .tasks
        .iter()
        .map(|t| t.def.id.clone())
        .collect();
    assert_eq!(seen, planned);
}

/// An embedded run stopping its worker ends the pull held for tasks at once, and later
/// pulls are not held: the run does not wait out a heartbeat after its job ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_pulls_end_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let svc = service(tmp.path(), CoordinatorConfig::default()).await;
    let heartbeat = svc.cfg.heartbeat;
    register(&svc, "a", 0);
    let first = held_pull(&svc, "a");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!first.is_finished(), "nothing is queued: the pull is held");
    let released = Instant::now();
    svc.release_pulls();
    let (tasks, at) = first.await.unwrap();
    let after = at.saturating_duration_since(released);
    assert!(tasks.is_empty());
    assert!(after < heartbeat / 2, "the held pull waited {after:?}");
    let t0 = Instant::now();
    let (tasks, _) = held_pull(&svc, "a").await.unwrap();
    assert!(tasks.is_empty());
    assert!(t0.elapsed() < heartbeat / 2, "a later pull was held");
}
