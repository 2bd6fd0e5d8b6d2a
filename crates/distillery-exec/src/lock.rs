//! Output locks: one job writes an output at a time.
//!
//! Two jobs publishing into one output would interleave: each deletes the files of earlier
//! runs that its own manifest does not list, so one could delete the other's parts after that
//! one committed a manifest naming them. A job therefore takes `_lock.json` in its output
//! before it plans anything there, and gives it back when it ends (published, failed or
//! cancelled); a coordinator that restarts takes the locks of the jobs it resumes again, in
//! its own name.
//!
//! The lock is read first, then created with object_store's `PutMode::Create`: atomic on local
//! disk, GCS, Azure and S3 (object_store sends `If-None-Match`, its default for S3). An
//! S3-compatible server that ignores that header, or a store without create-only puts
//! (`AWS_CONDITIONAL_PUT=disabled`: a warning), still gets the check before the write.
//!
//! A lock whose job is gone is taken over instead of refused: one left by a process of this
//! host that no longer runs (a `distillery run` stopped with Ctrl-C), or by a job the caller
//! knows has ended (a coordinator's own finished jobs). Taking over is atomic where the store
//! has it (`PutMode::Update` on the version read; on local disk, renaming the stale lock
//! aside, which only one process can do), so two processes cannot both take one stale lock.
//! Anything else is refused with an error that names the holder, and says to delete the file
//! if that job is gone.

use std::time::SystemTime;

use object_store::{ObjectStoreExt, PutMode, PutOptions, UpdateVersion};
use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::error::ExecError;
use crate::store::Location;

/// The lock's name in an output.
pub const LOCK_FILE: &str = "_lock.json";

/// What a lock says about its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputLock {
    /// The job (run id) writing the output.
    pub job: String,
    /// Its pipeline's name.
    pub pipeline: String,
    /// The host and process that took the lock.
    pub host: String,
    pub pid: u32,
    /// When it was taken (RFC 3339, UTC).
    pub since: String,
}

impl OutputLock {
    /// A lock for `job` held by this process.
    pub fn new(job: &str, pipeline: &str) -> OutputLock {
        OutputLock {
            job: job.to_string(),
            pipeline: pipeline.to_string(),
            host: host_name(),
            pid: std::process::id(),
            since: crate::run::rfc3339(SystemTime::now()),
        }
    }

    /// Whether this lock was taken by a process of this host that no longer runs (known only
    /// where `/proc` shows processes; elsewhere a holder is taken to be alive).
    fn holder_is_gone(&self) -> bool {
        self.host == host_name()
            && self.pid != std::process::id()
            && std::path::Path::new("/proc/self").exists()
            && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

/// This host's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `unknown`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown".to_string())
}

/// Takes the output's lock for `lock.job`. Succeeds when the lock is free, held by this job
/// (a coordinator resuming it: the lock is then written again in this process's name), or
/// held by a job that is gone: a dead process of this host, or one for which `ended` says
/// true. Otherwise fails naming the holder.
///
/// [`release`] reads the lock, then deletes it: a caller that takes over the locks of its own
/// ended jobs must not run that job's release at the same time (the coordinator serializes
/// the two).
pub async fn acquire(
    out: &Location,
    lock: &OutputLock,
    ended: impl Fn(&str) -> bool,
) -> Result<(), ExecError> {
    let body = serde_json::to_vec_pretty(lock).expect("lock serializes");
    // A few rounds: each ends taken, refused, or with the lock changed under us.
    for _ in 0..4 {
        if let Some((held, version)) = holder_versioned(out).await? {
            let ours = held.job == lock.job;
            if ours && held.host == lock.host && held.pid == lock.pid {
                return Ok(());
            }
            if !ours && !held.holder_is_gone() && !ended(&held.job) {
                return Err(locked(out, &held));
            }
            if !ours {
                warn!(output = %out.display, job = %held.job, host = %held.host, pid = held.pid, "taking over the lock of a job that is gone");
            }
            if replace(out, version, &body).await? {
                return Ok(());
            }
            continue;
        }
        let put = out
            .store
            .put_opts(
                &out.path(LOCK_FILE),
                body.clone().into(),
                PutOptions::from(PutMode::Create),
            )
            .await;
        match put {
            Ok(_) => return Ok(()),
            // Taken between the read and the put: read it again.
            Err(object_store::Error::AlreadyExists { .. }) => continue,
            Err(object_store::Error::NotImplemented { .. }) => {
                warn!(output = %out.display, "this store has no create-only put: the output lock is checked, then written");
                out.write(LOCK_FILE, body.clone()).await?;
                return Ok(());
            }
            Err(e) => return Err(ExecError::store(out.show(LOCK_FILE), e)),
        }
    }
    match holder(out).await? {
        Some(held) => Err(locked(out, &held)),
        None => Err(ExecError::output(
            out.show(LOCK_FILE),
            "the output lock kept changing hands while it was being taken: try again",
        )),
    }
}

/// Replaces the lock read at `version` with `body`; false when it changed meanwhile (or was
/// only moved aside: the caller then creates it). Atomic with `PutMode::Update`; where the
/// store has no such put (local disk), the stale lock is renamed aside, which one process
/// only can do, and the caller creates the lock anew.
async fn replace(out: &Location, version: UpdateVersion, body: &[u8]) -> Result<bool, ExecError> {
    let path = out.path(LOCK_FILE);
    let put = out
        .store
        .put_opts(
            &path,
            body.to_vec().into(),
            PutOptions::from(PutMode::Update(version)),
        )
        .await;
    match put {
        Ok(_) => return Ok(true),
        Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
            return Ok(false);
        }
        Err(object_store::Error::NotImplemented { .. }) => {}
        Err(e) => return Err(ExecError::store(out.show(LOCK_FILE), e)),
    }
    let aside = format!(
        "{LOCK_FILE}.{}-{}.stale",
        std::process::id(),
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    match out.store.rename(&path, &out.path(&aside)).await {
        Ok(()) => out.delete(&aside).await?,
        Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(ExecError::store(out.show(LOCK_FILE), e)),
    }
    Ok(false)
}

/// Gives the lock back if `job` holds it (a lock another job took over is left alone).
pub async fn release(out: &Location, job: &str) -> Result<(), ExecError> {
    match holder(out).await {
        Ok(Some(held)) if held.job == job => out.delete(LOCK_FILE).await,
        Ok(_) => Ok(()),
        // An unreadable lock is not this job's to remove.
        Err(ExecError::Output { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The output's lock, `None` when there is none.
pub async fn holder(out: &Location) -> Result<Option<OutputLock>, ExecError> {
    Ok(holder_versioned(out).await?.map(|(l, _)| l))
}

/// The output's lock and the version it was read at.
async fn holder_versioned(
    out: &Location,
) -> Result<Option<(OutputLock, UpdateVersion)>, ExecError> {
    let got = match out.store.get(&out.path(LOCK_FILE)).await {
        Ok(r) => r,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(ExecError::store(out.show(LOCK_FILE), e)),
    };
    let version = UpdateVersion {
        e_tag: got.meta.e_tag.clone(),
        version: got.meta.version.clone(),
    };
    let bytes = got
        .bytes()
        .await
        .map_err(|e| ExecError::store(out.show(LOCK_FILE), e))?;
    let lock = serde_json::from_slice(&bytes).map_err(|e| {
        ExecError::output(
            out.show(LOCK_FILE),
            format!("not a Distillery output lock ({e}); delete it if no job writes here"),
        )
    })?;
    Ok(Some((lock, version)))
}

fn locked(out: &Location, held: &OutputLock) -> ExecError {
    ExecError::output(
        &out.display,
        format!(
            "in use by job {} (pipeline `{}`, host {}, pid {}, since {}): two jobs publishing \
             into one output would delete each other's files. Wait for it to end, write \
             elsewhere, or delete {} if that job is gone",
            held.job,
            held.pipeline,
            held.host,
            held.pid,
            held.since,
            out.show(LOCK_FILE)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::open_location;

    fn local() -> (tempfile::TempDir, Location) {
        let dir = tempfile::tempdir().unwrap();
        let out = open_location(&dir.path().display().to_string(), true).unwrap();
        (dir, out)
    }

    #[tokio::test]
    async fn one_job_at_a_time() {
        let (_d, out) = local();
        let a = OutputLock::new("job-a", "p");
        acquire(&out, &a, |_| false).await.unwrap();
        assert_eq!(holder(&out).await.unwrap(), Some(a.clone()));
        // The same job again (a coordinator resuming it) keeps it.
        acquire(&out, &a, |_| false).await.unwrap();
        // Another job is refused, with the holder named.
        let b = OutputLock::new("job-b", "q");
        let e = acquire(&out, &b, |_| false).await.unwrap_err().to_string();
        assert!(e.contains("in use by job job-a"), "{e}");
        assert!(
            e.contains("pipeline `p`") && e.contains("_lock.json"),
            "{e}"
        );
        // Releasing as someone else leaves it; the holder's release frees it.
        release(&out, "job-b").await.unwrap();
        assert!(holder(&out).await.unwrap().is_some());
        release(&out, "job-a").await.unwrap();
        assert_eq!(holder(&out).await.unwrap(), None);
        acquire(&out, &b, |_| false).await.unwrap();
        assert_eq!(holder(&out).await.unwrap().unwrap().job, "job-b");
    }

    #[tokio::test]
    async fn a_gone_holder_is_taken_over() {
        let (_d, out) = local();
        // A job its caller knows has ended.
        acquire(&out, &OutputLock::new("old", "p"), |_| false)
            .await
            .unwrap();
        let b = OutputLock::new("new", "p");
        acquire(&out, &b, |j| j == "old").await.unwrap();
        assert_eq!(holder(&out).await.unwrap().unwrap().job, "new");
        // A process of this host that no longer runs (pids stay below 2^22 on Linux).
        if std::path::Path::new("/proc/self").exists() {
            plant(&out, "killed", &host_name(), 4_194_303 + 7).await;
            acquire(&out, &b, |_| false).await.unwrap();
            assert_eq!(holder(&out).await.unwrap().unwrap().job, "new");
        }
        // A holder on another host is not judged: refused.
        plant(&out, "remote", "elsewhere", 1).await;
        let e = acquire(&out, &b, |_| false).await.unwrap_err().to_string();
        assert!(e.contains("host elsewhere"), "{e}");
    }

    /// Writes a lock of `job` held by `pid` on `host`, as another process would have.
    async fn plant(out: &Location, job: &str, host: &str, pid: u32) {
        let lock = OutputLock {
            host: host.to_string(),
            pid,
            ..OutputLock::new(job, "p")
        };
        out.write(LOCK_FILE, serde_json::to_vec(&lock).unwrap())
            .await
            .unwrap();
    }

    /// Locations on local disk (take-over by renaming aside) and in memory (by a versioned
    /// put), each empty.
    fn both() -> Vec<(Option<tempfile::TempDir>, Location)> {
        let (d, l) = local();
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let m = open_location(&format!("memory://lock-test-{n}"), true).unwrap();
        vec![(Some(d), l), (None, m)]
    }

    #[tokio::test]
    async fn a_resumed_job_takes_its_lock_again_in_its_own_name() {
        for (_d, out) in both() {
            plant(&out, "job", "old-pod", 1).await;
            let now = OutputLock::new("job", "p");
            acquire(&out, &now, |_| false).await.unwrap();
            assert_eq!(holder(&out).await.unwrap(), Some(now), "{out:?}");
        }
    }

    #[tokio::test]
    async fn one_of_two_takes_a_stale_lock_over() {
        for (_d, out) in both() {
            plant(&out, "old", "gone", 1).await;
            let (a, b) = (OutputLock::new("a", "p"), OutputLock::new("b", "p"));
            let (ra, rb) = tokio::join!(
                acquire(&out, &a, |j| j == "old"),
                acquire(&out, &b, |j| j == "old")
            );
            assert!(ra.is_ok() != rb.is_ok(), "{out:?}: {ra:?} {rb:?}");
            let winner = if ra.is_ok() { "a" } else { "b" };
            assert_eq!(holder(&out).await.unwrap().unwrap().job, winner);
            // Nothing is left beside it.
            let files: Vec<String> = out
                .list("")
                .await
                .unwrap()
                .into_iter()
                .map(|f| f.0)
                .collect();
            assert_eq!(files, [LOCK_FILE], "{out:?}");
        }
    }

    #[tokio::test]
    async fn a_store_without_conditional_puts_gets_a_checked_lock() {
        let (_d, mut out) = local();
        out.store = crate::faults::without_conditional_put(out.store.clone());
        let a = OutputLock::new("a", "p");
        acquire(&out, &a, |_| false).await.unwrap();
        assert_eq!(holder(&out).await.unwrap(), Some(a));
        let e = acquire(&out, &OutputLock::new("b", "p"), |_| false)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("in use by job a"), "{e}");
        release(&out, "a").await.unwrap();
        acquire(&out, &OutputLock::new("b", "p"), |_| false)
            .await
            .unwrap();
        assert_eq!(holder(&out).await.unwrap().unwrap().job, "b");
    }

    #[tokio::test]
    async fn an_unreadable_lock_is_refused_and_left() {
        let (_d, out) = local();
        out.write(LOCK_FILE, b"garbage".to_vec()).await.unwrap();
        let e = acquire(&out, &OutputLock::new("j", "p"), |_| true)
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a Distillery output lock"), "{e}");
        release(&out, "j").await.unwrap();
        assert!(out.exists(LOCK_FILE).await.unwrap());
    }
}
