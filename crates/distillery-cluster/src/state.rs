//! Durable job state in the object store (`--state URL`), never only in memory:
//!
//! - `generations/NNNNNNNNNNNNNNNNNNNN`: created (if absent) by each coordinator start; the
//!   highest is the current generation, and attempts of older ones are fenced;
//! - `jobs/<job>/job.json`: the job as submitted (pipeline text, overrides, task ids, the
//!   input files and the stages' side files planned for it);
//! - `jobs/<job>/commits/<task>.json`: one commit record per task, created only if absent, so
//!   exactly one attempt of a task wins, whatever the races;
//! - `jobs/<job>/final.json`: how the job ended.
//!
//! A restarted coordinator lists `jobs/`, reloads every job without a `final.json` (its tasks
//! from the planned files, nothing resolved again) and marks the committed tasks done from their commit records.

use distillery_exec::plan::{PlannedFile, SideFiles};
use distillery_exec::store::{Location, open_location};
use distillery_exec::task::TaskOutput;
use object_store::{PutMode, PutOptions};
use serde::{Deserialize, Serialize};

use crate::ClusterError;

/// Commit records read at once on a restart.
const COMMIT_READS: usize = 64;

/// A submitted job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    pub job_id: String,
    pub pipeline_file: String,
    pub pipeline_text: String,
    pub overrides: Vec<String>,
    pub submitted_at_ms: i64,
    pub task_ids: Vec<String>,
    /// The input files (or byte ranges) planned at submission: a restarted coordinator
    /// rebuilds the job's tasks from them rather than resolving the input globs again.
    /// `None` in records written before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<PlannedFile>>,
    /// The files stages read besides the inputs (a label stage's `decontaminate` files),
    /// planned at submission likewise. `None` in records written before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<SideFiles>,
}

/// The winning attempt of a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitRecord {
    pub task_id: String,
    pub attempt_id: String,
    pub worker_id: String,
    pub output: TaskOutput,
}

/// How a job ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinalRecord {
    pub job_id: String,
    pub pipeline: String,
    pub output: String,
    /// succeeded, failed or cancelled.
    pub state: String,
    /// retryable, fatal or budget (failed jobs).
    pub error_kind: String,
    pub error: String,
    pub summary_json: String,
    pub tasks_total: u32,
}

/// The state store.
#[derive(Debug, Clone)]
pub struct StateStore {
    loc: Location,
}

/// The object name of a task's commit record: the task id hex-encoded (one-to-one, and only
/// characters every object store keeps as they are).
fn task_key(task: &str) -> String {
    task.bytes().map(|b| format!("{b:02x}")).collect()
}

impl StateStore {
    pub fn open(url: &str) -> Result<StateStore, ClusterError> {
        Ok(StateStore {
            loc: open_location(url, true)?,
        })
    }

    pub fn display(&self) -> &str {
        &self.loc.display
    }

    /// Creates an object only if absent: `Ok(false)` when it already existed.
    async fn create(&self, rel: &str, data: Vec<u8>) -> Result<bool, ClusterError> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .loc
            .store
            .put_opts(&self.loc.path(rel), data.into(), opts)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(ClusterError::Exec(distillery_exec::ExecError::store(
                self.loc.show(rel),
                e,
            ))),
        }
    }

    /// Starts a new coordinator generation: one more than the highest so far.
    pub async fn next_generation(&self) -> Result<u64, ClusterError> {
        loop {
            let max = self
                .loc
                .list("generations")
                .await?
                .iter()
                .filter_map(|(rel, _)| rel.rsplit('/').next()?.parse::<u64>().ok())
                .max()
                .unwrap_or(0);
            let next = max + 1;
            if self
                .create(&format!("generations/{next:020}"), Vec::new())
                .await?
            {
                return Ok(next);
            }
        }
    }

    pub async fn put_job(&self, job: &JobRecord) -> Result<(), ClusterError> {
        let data = serde_json::to_vec_pretty(job).expect("job serializes");
        if !self
            .create(&format!("jobs/{}/job.json", job.job_id), data)
            .await?
        {
            return Err(ClusterError::Config(format!(
                "job {} exists already",
                job.job_id
            )));
        }
        Ok(())
    }

    /// Creates a task's commit record if none exists: `Ok(None)` when it was created now,
    /// `Ok(Some(record))` with the record already there (another attempt's, or this one's
    /// from an earlier try whose answer was lost).
    pub async fn commit(
        &self,
        job: &str,
        rec: &CommitRecord,
    ) -> Result<Option<CommitRecord>, ClusterError> {
        let rel = format!("jobs/{job}/commits/{}.json", task_key(&rec.task_id));
        let data = serde_json::to_vec(rec).expect("commit serializes");
        if self.create(&rel, data).await? {
            return Ok(None);
        }
        Ok(Some(self.read_json(&rel).await?))
    }

    /// Every commit record of a job, in no particular order, read [`COMMIT_READS`] at a
    /// time: a restart of a job with 100,000 committed tasks on S3 would otherwise wait for
    /// 100,000 round trips one after the other.
    pub async fn commits(&self, job: &str) -> Result<Vec<CommitRecord>, ClusterError> {
        use futures::{StreamExt, TryStreamExt};
        let listed = self.loc.list(&format!("jobs/{job}/commits")).await?;
        futures::stream::iter(listed)
            .map(|(rel, _)| async move { self.read_json(&rel).await })
            .buffer_unordered(COMMIT_READS)
            .try_collect()
            .await
    }

    pub async fn put_final(&self, rec: &FinalRecord) -> Result<(), ClusterError> {
        let data = serde_json::to_vec_pretty(rec).expect("final serializes");
        self.loc
            .write(&format!("jobs/{}/final.json", rec.job_id), data)
            .await?;
        Ok(())
    }

    /// Every job: its record and, when it ended, its final record.
    pub async fn jobs(&self) -> Result<Vec<(JobRecord, Option<FinalRecord>)>, ClusterError> {
        let mut ids: Vec<String> = self
            .loc
            .list("jobs")
            .await?
            .into_iter()
            .filter_map(|(rel, _)| {
                let rest = rel.strip_prefix("jobs/")?;
                let (id, file) = rest.split_once('/')?;
                (file == "job.json").then(|| id.to_string())
            })
            .collect();
        ids.sort();
        let mut out = Vec::new();
        for id in ids {
            let job: JobRecord = self.read_json(&format!("jobs/{id}/job.json")).await?;
            let fin = format!("jobs/{id}/final.json");
            let fin = if self.loc.exists(&fin).await? {
                Some(self.read_json(&fin).await?)
            } else {
                None
            };
            out.push((job, fin));
        }
        Ok(out)
    }

    async fn read_json<T: serde::de::DeserializeOwned>(
        &self,
        rel: &str,
    ) -> Result<T, ClusterError> {
        let bytes = self.loc.read(rel).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            ClusterError::State(format!("{}: unreadable record: {e}", self.loc.show(rel)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn exactly_one_commit_wins_and_generations_grow() {
        let s = StateStore::open("memory://state-test").unwrap();
        assert_eq!(s.next_generation().await.unwrap(), 1);
        assert_eq!(s.next_generation().await.unwrap(), 2);
        let rec = |a: &str| CommitRecord {
            task_id: "ingest/x-0000".into(),
            attempt_id: a.into(),
            worker_id: "w".into(),
            output: TaskOutput::default(),
        };
        assert!(s.commit("j", &rec("a1")).await.unwrap().is_none());
        let winner = s.commit("j", &rec("a2")).await.unwrap().unwrap();
        assert_eq!(winner.attempt_id, "a1");
        // A task id with a dot and one with a slash in its place do not share a record.
        let mut other = rec("b1");
        other.task_id = "ingest.x-0000".into();
        assert!(s.commit("j", &other).await.unwrap().is_none());
        let all = s.commits("j").await.unwrap();
        assert_eq!(all.len(), 2);
        assert!(all.iter().any(|r| r.attempt_id == "a1"));
        // More records than are read at once: every one comes back, once.
        for i in 0..(3 * COMMIT_READS + 5) {
            let mut r = rec("c1");
            r.task_id = format!("stage/hseq/shard-{i:05}");
            assert!(s.commit("k", &r).await.unwrap().is_none());
        }
        let mut ids: Vec<String> = s
            .commits("k")
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.task_id)
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 3 * COMMIT_READS + 5);
    }
}
