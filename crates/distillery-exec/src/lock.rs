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
//! knows has ended (a coordinator's own finished jobs). Taking over is atomic: a versioned
//! put (`PutMode::Update` on the version read) where the store has one; on local disk, the
//! take-over goes through a create-only hard link, which one process only can hold (see
//! `replace`), so two processes cannot both take one stale lock.
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

/// Held (a hard link to the lock) by the one process taking a stale lock over on a store
/// without versioned puts (local disk).
pub const TAKEOVER_FILE: &str = "_lock.json.takeover";

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
            since: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
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
    let mut busy = false;
    for round in 0..12u32 {
        if busy {
            // Another process is taking a stale lock over: give it time to finish (about
            // three seconds in all).
            let ms = (25u64 << round.min(4)).min(400);
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        busy = false;
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
            match replace(out, version, &held, &body).await? {
                Replaced::Yes => return Ok(()),
                Replaced::Again => {}
                Replaced::Busy => busy = true,
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
    if busy {
        return Err(ExecError::output(
            out.show(TAKEOVER_FILE),
            format!(
                "another process has been taking this output's stale lock over for a while; if \
                 none is (one stopped half-way), delete {} and try again",
                out.show(TAKEOVER_FILE)
            ),
        ));
    }
    match holder(out).await? {
        Some(held) => Err(locked(out, &held)),
        None => Err(ExecError::output(
            out.show(LOCK_FILE),
            "the output lock kept changing hands while it was being taken: try again",
        )),
    }
}

/// What became of an attempt to replace a stale lock.
enum Replaced {
    /// The lock is now ours.
    Yes,
    /// The stale lock is gone (changed by someone else, or removed by us): read it again.
    Again,
    /// Another process is taking the stale lock over: wait, then read it again.
    Busy,
}

/// Replaces the lock read at `version` with `body`.
///
/// With `PutMode::Update` (object stores with versions or ETags) this is one atomic put.
/// Local disk has no such put, and renaming the lock aside is not enough: a process that read
/// the stale lock late would rename the winner's fresh lock away. So take-overs are serialized
/// through [`TAKEOVER_FILE`], a hard link to the lock made with a create-only copy: only one
/// process holds it, and it holds the lock file as it was when linked. If that is still the
/// version read (same ETag: inode, mtime, size), nobody else can have replaced the lock, and
/// the claimant deletes it and lets the caller create its own; else the lock changed and is
/// read again. A store with neither gets a checked delete, with a warning.
async fn replace(
    out: &Location,
    version: UpdateVersion,
    held: &OutputLock,
    body: &[u8],
) -> Result<Replaced, ExecError> {
    let path = out.path(LOCK_FILE);
    let err = |e| ExecError::store(out.show(LOCK_FILE), e);
    let put = out
        .store
        .put_opts(
            &path,
            body.to_vec().into(),
            PutOptions::from(PutMode::Update(version.clone())),
        )
        .await;
    match put {
        Ok(_) => return Ok(Replaced::Yes),
        Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
            return Ok(Replaced::Again);
        }
        Err(object_store::Error::NotImplemented { .. }) => {}
        Err(e) => return Err(err(e)),
    }
    let claim = out.path(TAKEOVER_FILE);
    match out.store.copy_if_not_exists(&path, &claim).await {
        Ok(()) => {}
        Err(object_store::Error::NotFound { .. }) => return Ok(Replaced::Again),
        Err(object_store::Error::AlreadyExists { .. }) => return Ok(Replaced::Busy),
        Err(object_store::Error::NotImplemented { .. }) => {
            warn!(output = %out.display, "this store has no conditional writes: a stale output lock is checked, then deleted");
            if holder(out).await?.as_ref() == Some(held) {
                out.delete(LOCK_FILE).await?;
            }
            return Ok(Replaced::Again);
        }
        Err(e) => return Err(err(e)),
    }
    // The claim is ours: compare what it links to with what was read (the ETag, and the
    // holder too, in case a fresh lock reused the stale one's inode within a microsecond).
    let same = async {
        let got = out.store.get(&claim).await?;
        let e_tag = got.meta.e_tag.clone();
        let bytes = got.bytes().await?;
        let linked = serde_json::from_slice::<OutputLock>(&bytes).ok();
        Ok::<_, object_store::Error>(
            e_tag.is_some() && e_tag == version.e_tag && linked.as_ref() == Some(held),
        )
    }
    .await;
    let same = match same {
        Ok(same) => same,
        Err(e) => {
            out.delete(TAKEOVER_FILE).await?;
            return Err(err(e));
        }
    };
    let removed = if same {
        out.delete(LOCK_FILE).await
    } else {
        Ok(())
    };
    out.delete(TAKEOVER_FILE).await?;
    removed?;
    Ok(Replaced::Again)
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

    /// Locations on local disk (take-over through a hard-linked claim) and in memory (by a versioned
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

    /// Three processes race for one stale lock, many times over, on threads of their own:
    /// exactly one wins each time, and nothing but the lock is left.
    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn one_of_three_takes_a_stale_lock_over() {
        for round in 0..40 {
            for (_d, out) in both() {
                plant(&out, "old", "gone", 1).await;
                let race = |job: &'static str| {
                    let out = out.clone();
                    tokio::spawn(async move {
                        acquire(&out, &OutputLock::new(job, "p"), |j| j == "old")
                            .await
                            .map(|()| job)
                    })
                };
                let tasks = [race("a"), race("b"), race("c")];
                let mut won = Vec::new();
                for t in tasks {
                    match t.await.unwrap() {
                        Ok(job) => won.push(job),
                        Err(e) => assert!(e.to_string().contains("in use by job"), "{e}"),
                    }
                }
                assert_eq!(won.len(), 1, "round {round}, {out:?}: {won:?} won");
                assert_eq!(holder(&out).await.unwrap().unwrap().job, won[0]);
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
    }

    #[tokio::test]
    async fn a_take_over_left_half_way_is_named() {
        let (_d, out) = local();
        plant(&out, "old", "gone", 1).await;
        out.write(TAKEOVER_FILE, b"{}".to_vec()).await.unwrap();
        let e = acquire(&out, &OutputLock::new("a", "p"), |j| j == "old")
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("delete") && e.contains(TAKEOVER_FILE), "{e}");
        out.delete(TAKEOVER_FILE).await.unwrap();
        acquire(&out, &OutputLock::new("a", "p"), |j| j == "old")
            .await
            .unwrap();
        assert_eq!(holder(&out).await.unwrap().unwrap().job, "a");
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
        // A stale lock is taken over by a checked delete.
        acquire(&out, &OutputLock::new("c", "p"), |j| j == "b")
            .await
            .unwrap();
        assert_eq!(holder(&out).await.unwrap().unwrap().job, "c");
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
