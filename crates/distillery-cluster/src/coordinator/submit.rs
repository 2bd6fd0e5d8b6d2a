//! Submission: a job checked and planned, its output locked, recorded in the state store
//! with the files it was planned on, and its runtime state installed with the ingest tasks
//! queued (also how a restart installs a resumed job).

use std::collections::BTreeSet;

use distillery_core::spec::Pipeline;
use distillery_core::{ErrorKind as Kind, HasKind};
use distillery_exec::lock::OutputLock;
use distillery_exec::store::open_location;
use distillery_exec::task::{JobPlan, plan_tasks};
use tracing::info;

use super::job::JobRt;
use super::schedule::push_ready_tasks;
use super::status::unstarted_final;
use super::{CoordinatorService, now_ms};
use crate::ClusterError;
use crate::state::{CommitRecord, JobRecord};

impl CoordinatorService {
    /// Installs a job's runtime state and queues its ready tasks; `commits` are its tasks
    /// already committed (a restart). A bad-record gate that fails on the reloaded commits
    /// ends the job at once.
    pub(super) fn load_job(
        &self,
        rec: JobRecord,
        commits: Vec<CommitRecord>,
        p: Pipeline,
        plan: JobPlan,
    ) -> Result<(), ClusterError> {
        let mut job = JobRt::new(rec, p, plan)?;
        // Level 0, and every level whose lower levels all committed before a restart.
        let mut ready = job.start(commits);
        let gate = job.advance().map(|r| ready.extend(r));
        let id = job.id().to_string();
        let mut inner = self.lock();
        inner.jobs.insert(id.clone(), job);
        match gate {
            Err(e) => {
                self.end_locked(&mut inner, &id, |p| p.fail_gate(e.to_string()));
            }
            Ok(()) => push_ready_tasks(&mut inner, &id, ready),
        }
        Ok(())
    }

    /// Submits a job: checked, planned, recorded in the state store, queued.
    pub async fn submit(
        &self,
        file: &str,
        text: &str,
        overrides: &[String],
    ) -> Result<String, ClusterError> {
        let mut p = distillery_exec::stages::parse_pipeline(file, text, overrides)
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        // Days a corpus applied before are not parsed again (a repeated night costs nothing).
        let left = distillery_exec::plan::leave_out_read_days(&mut p)
            .await
            .map_err(ClusterError::Exec)?;
        for dir in &left {
            info!(folder = %dir, "daily folder applied before: not read");
        }
        let plan = plan_tasks(&p).map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let job_id = distillery_exec::run::new_run_id(&p.hash);
        // The output is the user's to fix (a file, a bad URL, another job's): an invalid job,
        // not an unavailable coordinator.
        let invalid = |e: distillery_exec::ExecError| match e.kind() {
            Kind::Fatal => ClusterError::Invalid(e.to_string()),
            Kind::Retryable => ClusterError::Exec(e),
        };
        let out = open_location(&p.output, true).map_err(invalid)?;
        // Jobs of this coordinator that ended (their lock may not be given back yet).
        let (running, ended): (Vec<String>, BTreeSet<String>) = {
            let inner = self.lock();
            (
                inner.jobs.keys().cloned().collect(),
                inner
                    .jobs
                    .iter()
                    .filter(|(_, j)| !j.phase.is_live())
                    .map(|(id, _)| id.clone())
                    .chain(inner.finals.keys().cloned())
                    .collect(),
            )
        };
        let lock = OutputLock::new(&job_id, &p.name);
        {
            let _serial = self.output_locks.lock().await;
            // A directory of the user's is never written (or cleaned) as an output.
            distillery_exec::claim::claim(&out, distillery_exec::claim::Owned::Output)
                .await
                .map_err(invalid)?;
            distillery_exec::lock::acquire(&out, &lock, |j| ended.contains(j))
                .await
                .map_err(invalid)?;
        }
        let submitted = async {
            distillery_exec::publish::cleanup_stale_staging(&out, &job_id, &running).await?;
            let rec = JobRecord {
                job_id: job_id.clone(),
                pipeline_file: file.to_string(),
                pipeline_text: text.to_string(),
                overrides: overrides.to_vec(),
                submitted_at_ms: now_ms(),
                task_ids: plan.tasks.iter().map(|t| t.id.clone()).collect(),
                // A restart runs what was planned now, whatever the globs match by then.
                files: Some(plan.plan.files.clone()),
                side: Some(plan.plan.side.clone()),
            };
            self.state.put_job(&rec).await?;
            info!(job = %job_id, pipeline = %p.name, tasks = rec.task_ids.len(), "job submitted");
            let (name, output) = (p.name.clone(), p.output.clone());
            let loaded = self.load_job(rec, Vec::new(), p, plan);
            if let Err(e) = &loaded {
                // Recorded: a restart must not resume a job that never started.
                let error = format!("cannot be started: {e}");
                self.record_final(unstarted_final(job_id.clone(), name, output, error))
                    .await;
            }
            loaded
        };
        if let Err(e) = submitted.await {
            // Not started: the output is free again.
            self.give_back_lock(&out, &job_id).await;
            return Err(e);
        }
        Ok(job_id)
    }
}
