//! Serving the coordinator, and the embedded cluster behind `distillery run`: a coordinator on
//! a loopback port and an in-process worker that reach each other through the same gRPC code
//! as a real cluster, so there is one path to test.

use std::net::SocketAddr;
use std::time::Duration;

use distillery_core::summary::RunSummary;
use distillery_exec::publish::{read_manifest, read_summary};
use distillery_exec::run::{ProgressMode, RunOutcome};
use distillery_exec::store::open_location;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tracing::{info, warn};

use crate::auth::Token;
use crate::client::{Client, connect, rpc_err, submit_err};
use crate::coordinator::{CoordinatorConfig, CoordinatorService};
use crate::pb::coordinator_server::CoordinatorServer;
use crate::worker::{Faults, WorkerConfig, WorkerMetrics, run_worker};
use crate::{ClusterError, pb};

/// TLS for the coordinator's gRPC port: PEM certificate chain and key.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// Serves the coordinator on a bound listener until `shutdown` resolves.
pub async fn serve(
    svc: CoordinatorService,
    listener: TcpListener,
    token: Token,
    tls: Option<TlsFiles>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ClusterError> {
    let mut builder = Server::builder();
    if let Some(t) = tls {
        let read = |p: &std::path::Path| {
            std::fs::read(p)
                .map_err(|e| ClusterError::Config(format!("cannot read {}: {e}", p.display())))
        };
        let identity = Identity::from_pem(read(&t.cert)?, read(&t.key)?);
        builder = builder.tls_config(ServerTlsConfig::new().identity(identity))?;
    }
    let check = move |req: tonic::Request<()>| token.check(req);
    let service = tonic::service::interceptor::InterceptedService::new(
        CoordinatorServer::new(svc)
            .max_decoding_message_size(crate::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(crate::MAX_MESSAGE_BYTES),
        check,
    );
    builder
        .add_service(service)
        .serve_with_incoming_shutdown(
            // Without `TCP_NODELAY` an answer sent in more than one write waits for the
            // client's delayed ACK: about 40 ms a call on Linux.
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await?;
    Ok(())
}

/// Waits for a job to end, polling its status. `Ok` with the final status whatever the
/// outcome; the coordinator being unreachable for a while (a restart) is waited out.
pub async fn wait_job(
    client: &mut Client,
    addr: &str,
    job: &str,
    every: Duration,
) -> Result<pb::JobStatus, ClusterError> {
    let mut unreachable_since: Option<std::time::Instant> = None;
    loop {
        match client
            .get_job(pb::GetJobRequest {
                job_id: job.to_string(),
                ..Default::default()
            })
            .await
        {
            Ok(s) => {
                unreachable_since = None;
                let s = s.into_inner();
                if s.state != pb::JobState::Running as i32 {
                    return Ok(s);
                }
            }
            Err(s) if s.code() == tonic::Code::Unavailable => {
                let since = *unreachable_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > Duration::from_secs(300) {
                    return Err(rpc_err(addr, s));
                }
            }
            Err(s) => return Err(rpc_err(addr, s)),
        }
        tokio::time::sleep(every).await;
    }
}

/// A finished job as a run outcome, or its failure as an error.
pub async fn outcome_of(status: pb::JobStatus) -> Result<RunOutcome, ClusterError> {
    if status.state != pb::JobState::Succeeded as i32 {
        return Err(ClusterError::JobFailed {
            job: status.job_id.clone(),
            kind: pb::ErrorKind::try_from(status.error_kind).unwrap_or(pb::ErrorKind::Fatal),
            message: status.error.clone(),
        });
    }
    // The output's summary, whole: a status carries it without its per-task lists.
    let out = open_location(&status.output, false)?;
    let summary: RunSummary = match read_summary(&out).await {
        Ok(s) => s,
        Err(_) => serde_json::from_str(&status.summary_json)
            .map_err(|e| ClusterError::State(format!("bad run summary: {e}")))?,
    };
    let manifest = read_manifest(&out).await?;
    Ok(RunOutcome {
        summary,
        manifest,
        output: status.output,
    })
}

/// Runs a pipeline through an embedded cluster: a coordinator on a loopback port with its
/// state in a temporary directory, and one in-process worker with `parallelism` slots.
///
/// The state directory (`distillery-run-<pid>-<random>` in the temporary directory) is
/// private to the user (mode 0700) and removed when the run ends, fails or panics; the ones
/// that runs killed before their end left behind are swept first ([`sweep_stale_temp_dirs`]).
pub async fn run_embedded(
    file: &str,
    text: &str,
    overrides: &[String],
    parallelism: usize,
    mode: ProgressMode,
    ui: Option<SocketAddr>,
) -> Result<RunOutcome, ClusterError> {
    let tmp = std::env::temp_dir();
    let state_dir = private_temp_dir(&tmp, RUN_DIR_PREFIX)?;
    sweep_stale_temp_dirs(&tmp, state_dir.path());
    // `state_dir` is removed when dropped: at the end, on an error and on a panic alike.
    run_embedded_in(
        state_dir.path(),
        file,
        text,
        overrides,
        parallelism,
        mode,
        ui,
    )
    .await
}

/// The name prefix of the embedded run's state directories (followed by `<pid>-<random>`).
pub const RUN_DIR_PREFIX: &str = "distillery-run-";

/// The name prefixes of the temporary directories this program makes (each followed by
/// `<pid>-<random>`): the embedded run's state, and the index stage's scratch.
pub const TEMP_DIR_PREFIXES: &[&str] = &[RUN_DIR_PREFIX, "distillery-index-"];

/// Creates `<prefix><pid>-<random>` under `parent`, readable by this user only (0700) and
/// removed when the returned value is dropped.
pub fn private_temp_dir(
    parent: &std::path::Path,
    prefix: &str,
) -> Result<tempfile::TempDir, ClusterError> {
    let mut b = tempfile::Builder::new();
    let name = format!("{prefix}{}-", std::process::id());
    b.prefix(&name);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o700));
    }
    b.tempdir_in(parent).map_err(|e| {
        ClusterError::Config(format!(
            "cannot create a temporary directory in {}: {e}",
            parent.display()
        ))
    })
}

/// The pid in a name `<prefix><pid>-<rest>` of one of [`TEMP_DIR_PREFIXES`], else `None`.
fn temp_dir_pid(name: &str) -> Option<u32> {
    let rest = TEMP_DIR_PREFIXES
        .iter()
        .find_map(|p| name.strip_prefix(p))?;
    let (pid, suffix) = rest.split_once('-')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) || suffix.is_empty() {
        return None;
    }
    pid.parse().ok()
}

/// Removes from `parent` the temporary directories of this program ([`TEMP_DIR_PREFIXES`])
/// whose process no longer runs (no `/proc/<pid>`): what runs killed before their end left
/// behind. Only directories (never a symbolic link, never followed), only of the same owner as
/// `ours` (a directory this process just made there), never this process's own; nothing where
/// there is no `/proc`. Returns how many were removed.
pub fn sweep_stale_temp_dirs(parent: &std::path::Path, ours: &std::path::Path) -> usize {
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return 0;
    }
    #[cfg(unix)]
    let owner = {
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(ours) {
            Ok(m) => m.uid(),
            Err(_) => return 0,
        }
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_dir_pid) else {
            continue;
        };
        if pid == me || proc.join(pid.to_string()).exists() {
            continue;
        }
        let path = entry.path();
        // `symlink_metadata`: a link named like ours is not a directory and is left alone.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.file_type().is_dir() {
            continue;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if meta.uid() != owner {
                continue;
            }
        }
        // `remove_dir_all` removes links inside without following them.
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                removed += 1;
                info!(path = %path.display(), pid, "removed a stale temporary directory");
            }
            Err(e) => {
                warn!(path = %path.display(), error = %e, "cannot remove a stale temporary directory")
            }
        }
    }
    removed
}

async fn run_embedded_in(
    state_dir: &std::path::Path,
    file: &str,
    text: &str,
    overrides: &[String],
    parallelism: usize,
    mode: ProgressMode,
    ui: Option<SocketAddr>,
) -> Result<RunOutcome, ClusterError> {
    let cfg = CoordinatorConfig {
        heartbeat: Duration::from_millis(200),
        lease: Duration::from_secs(60),
        // One worker: a copy of a slow task would only compete with it.
        straggler_factor: 0.0,
        ..CoordinatorConfig::default()
    };
    let svc = CoordinatorService::start(&state_dir.display().to_string(), cfg).await?;
    let ticker = svc.spawn_ticker();
    let page = match ui {
        Some(addr) => {
            let m = svc.clone();
            let (at, handle) = crate::metrics::serve(
                addr,
                std::sync::Arc::new(move || m.metrics()),
                svc.ready_flag(),
                Some(svc.pages()),
                crate::http::Limits::default(),
            )
            .await
            .map_err(|e| {
                ClusterError::Config(format!("cannot serve the job page on {addr}: {e}"))
            })?;
            eprintln!("job page: http://{at}/");
            Some(handle)
        }
        None => None,
    };
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| ClusterError::Config(format!("cannot bind a loopback port: {e}")))?;
    let addr = format!(
        "http://{}",
        listener
            .local_addr()
            .map_err(|e| ClusterError::Config(e.to_string()))?
    );
    let token = Token::random()?;
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let svc_done = svc.clone();
    let server = tokio::spawn(serve(svc, listener, token.clone(), None, async move {
        let _ = stop_rx.changed().await;
    }));
    info!(coordinator = %addr, "embedded coordinator started");
    let mut client = connect(&addr, token.clone(), None)?;
    let (worker_stop_tx, worker_stop_rx) = watch::channel(false);
    let wcfg = WorkerConfig {
        coordinator: addr.clone(),
        worker_id: "local".to_string(),
        slots: parallelism.max(1) as u32,
        gpus: 0,
        memory_bytes: 0,
        labels: Default::default(),
        parallelism: parallelism.max(1),
        grace: Duration::from_secs(5),
        mode,
        faults: Faults::default(),
    };
    let worker_client = connect(&addr, token, None)?;
    // Submitted before the worker starts, so that its first pull finds the first tasks
    // instead of waiting a heartbeat (200 ms) for them.
    let job = client
        .submit_job(pb::SubmitJobRequest {
            pipeline_file: file.to_string(),
            pipeline_text: text.to_string(),
            overrides: overrides.to_vec(),
        })
        .await;
    let worker = tokio::spawn(run_worker(
        wcfg,
        worker_client,
        worker_stop_rx,
        std::sync::Arc::new(WorkerMetrics::default()),
    ));
    let result = match job {
        Ok(j) => {
            let job = j.into_inner().job_id;
            match wait_job(&mut client, &addr, &job, Duration::from_millis(50)).await {
                Ok(status) => outcome_of(status).await,
                Err(e) => Err(e),
            }
        }
        Err(s) => Err(submit_err(&addr, s)),
    };
    let _ = worker_stop_tx.send(true);
    // The worker's pull may be held for a heartbeat waiting for tasks that will not come.
    svc_done.release_pulls();
    let _ = worker.await;
    let _ = stop_tx.send(true);
    let _ = server.await;
    ticker.abort();
    if let Some(page) = page {
        page.abort();
    }
    // A failed job's staging is removed in the background: done before the process exits
    // (bounded: a state store that keeps refusing the final record must not hang the run).
    if tokio::time::timeout(Duration::from_secs(60), svc_done.after_jobs_done())
        .await
        .is_err()
    {
        warn!("the failed job's staging is still being removed; leaving it");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid that no process has now.
    fn dead_pid() -> u32 {
        (100_000..4_000_000u32)
            .rev()
            .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
            .unwrap()
    }

    #[test]
    fn temp_dir_names_are_parsed_strictly() {
        assert_eq!(temp_dir_pid("distillery-run-123-abc"), Some(123));
        assert_eq!(temp_dir_pid("distillery-index-9-0a1b"), Some(9));
        assert_eq!(temp_dir_pid("distillery-run-123-"), None);
        assert_eq!(temp_dir_pid("distillery-run-12x-abc"), None);
        assert_eq!(temp_dir_pid("distillery-run--abc"), None);
        assert_eq!(temp_dir_pid("distillery-runs-1-abc"), None);
        assert_eq!(temp_dir_pid("other-123-abc"), None);
    }

    #[cfg(unix)]
    #[test]
    fn the_run_directory_is_private_and_removed_on_drop_and_on_panic() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        let d = private_temp_dir(parent.path(), RUN_DIR_PREFIX).unwrap();
        let name = d.path().file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(temp_dir_pid(&name), Some(std::process::id()), "{name}");
        let mode = std::fs::metadata(d.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let path = d.path().to_path_buf();
        std::fs::write(path.join("f"), b"x").unwrap();
        drop(d);
        assert!(!path.exists());

        let p = parent.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let r = std::panic::catch_unwind(move || {
            let d = private_temp_dir(&p, RUN_DIR_PREFIX).unwrap();
            tx.send(d.path().to_path_buf()).unwrap();
            panic!("a run that panics");
        });
        assert!(r.is_err());
        assert!(!rx.recv().unwrap().exists());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_sweep_removes_only_our_directories_of_dead_processes() {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        let ours = private_temp_dir(p, RUN_DIR_PREFIX).unwrap();
        let dead = dead_pid();
        let me = std::process::id();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), b"keep").unwrap();

        let stale_run = p.join(format!("distillery-run-{dead}-abc123"));
        let stale_index = p.join(format!("distillery-index-{dead}-0a1b2c3d"));
        for d in [&stale_run, &stale_index] {
            std::fs::create_dir_all(d.join("sub")).unwrap();
            std::fs::write(d.join("sub/state.json"), b"{}").unwrap();
        }
        // A link inside a stale directory is removed, not followed.
        std::os::unix::fs::symlink(outside.path(), stale_run.join("out")).unwrap();
        // Kept: a live process's, this process's, a link, a file, other names.
        let live = p.join("distillery-run-1-abc");
        let own = p.join(format!("distillery-run-{me}-zzz"));
        let other = p.join(format!("someone-{dead}-abc"));
        let bad = p.join(format!("distillery-run-{dead}"));
        for d in [&live, &own, &other, &bad] {
            std::fs::create_dir(d).unwrap();
        }
        let link = p.join(format!("distillery-run-{dead}-link"));
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        let file = p.join(format!("distillery-run-{dead}-file"));
        std::fs::write(&file, b"x").unwrap();

        assert_eq!(sweep_stale_temp_dirs(p, ours.path()), 2);
        assert!(!stale_run.exists() && !stale_index.exists());
        for kept in [&live, &own, &other, &bad, &file, &ours.path().to_path_buf()] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        assert!(std::fs::symlink_metadata(&link).is_ok());
        assert_eq!(
            std::fs::read(outside.path().join("keep.txt")).unwrap(),
            b"keep"
        );
    }
}
