//! A restart: every job of the state store is reloaded, ended ones as their final records,
//! unfinished ones rebuilt from their job record (its tasks from the files planned when it
//! was submitted, never from the input globs again) and their commit records, their output
//! locks taken again in this process's name.

use std::collections::BTreeSet;

use distillery_core::spec::Pipeline;
use distillery_exec::ExecError;
use distillery_exec::lock::OutputLock;
use distillery_exec::plan::{PlannedFile, SideFiles, plan_known, resolve_side};
use distillery_exec::store::open_location;
use distillery_exec::task::{JobPlan, plan_tasks, tasks_of};
use tracing::{info, warn};

use super::status::unstarted_final;
use super::{CoordinatorService, error_kind};
use crate::ClusterError;
use crate::state::JobRecord;

/// A job's pipeline and plan, from its record: the tasks rebuilt from the input files and
/// side files planned at submission; what a record lacks (written by an older coordinator) is
/// resolved again.
pub(super) fn replan(rec: &JobRecord) -> Result<(Pipeline, JobPlan), ClusterError> {
    let p = distillery_exec::stages::parse_pipeline(
        &rec.pipeline_file,
        &rec.pipeline_text,
        &rec.overrides,
    )
    .map_err(|e| ClusterError::Config(e.to_string()))?;
    let plan = match &rec.files {
        Some(files) => {
            let side = match &rec.side {
                Some(side) => side.clone(),
                None => {
                    warn!(
                        job = %rec.job_id,
                        "the job record has no planned side files (an older record): resolving them again"
                    );
                    resolve_side(&p).map_err(|e| ClusterError::Config(e.join("\n")))?
                }
            };
            plan_from_files(&p, files.clone(), side)?
        }
        None => {
            warn!(
                job = %rec.job_id,
                "the job record has no planned files (an older record): resolving its inputs again"
            );
            plan_tasks(&p)?
        }
    };
    Ok((p, plan))
}

/// [`plan_tasks`] on files planned before: the same tasks, and no input path or side file
/// resolved again.
pub(super) fn plan_from_files(
    p: &Pipeline,
    files: Vec<PlannedFile>,
    side: SideFiles,
) -> Result<JobPlan, ExecError> {
    Ok(tasks_of(plan_known(p, files, side)?))
}

impl CoordinatorService {
    /// Reloads every job of the state store: the ended ones' final records, the unfinished
    /// ones resumed (or ended as failed when they cannot be).
    pub(super) async fn recover(&self) -> Result<(), ClusterError> {
        for (rec, fin) in self.state.jobs().await? {
            match fin {
                Some(f) => {
                    self.lock().finals.insert(f.job_id.clone(), f);
                }
                None => self.resume(rec).await?,
            }
        }
        Ok(())
    }

    async fn resume(&self, rec: JobRecord) -> Result<(), ClusterError> {
        let commits = self.state.commits(&rec.job_id).await?;
        let id = rec.job_id.clone();
        let (text, file) = (rec.pipeline_text.clone(), rec.pipeline_file.clone());
        let overrides = rec.overrides.clone();
        let loaded = replan(&rec).and_then(|(p, plan)| self.load_job(rec, commits, p, plan));
        match loaded {
            Ok(()) => {
                info!(job = %id, "job resumed from the state store");
                self.retake_lock(&id).await;
            }
            Err(e) => {
                warn!(job = %id, error = %e, "job cannot be resumed");
                let p = distillery_exec::stages::parse_pipeline(&file, &text, &overrides).ok();
                if let Some(out) = p
                    .as_ref()
                    .and_then(|p| open_location(&p.output, false).ok())
                {
                    self.give_back_lock(&out, &id).await;
                }
                let fin = unstarted_final(
                    id,
                    p.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
                    p.map(|p| p.output).unwrap_or_default(),
                    format!("cannot be resumed: {e}"),
                );
                self.record_final(fin).await;
            }
        }
        Ok(())
    }

    /// Takes a resumed job's output lock again, in this process's name (the lock names the
    /// process that submitted it, gone now); a lock another job took meanwhile fails the job.
    async fn retake_lock(&self, job_id: &str) {
        let Some((out, name)) = self
            .lock()
            .jobs
            .get(job_id)
            .filter(|j| j.phase.is_live())
            .map(|j| (j.out.clone(), j.p.name.clone()))
        else {
            // Failed while loading (its bad-record gate): its lock is being given back.
            return;
        };
        let ended: BTreeSet<String> = self.lock().finals.keys().cloned().collect();
        let taken = {
            let _serial = self.output_locks.lock().await;
            let lock = OutputLock::new(job_id, &name);
            distillery_exec::lock::acquire(&out, &lock, |j| ended.contains(j)).await
        };
        if let Err(e) = taken {
            self.fail_job(job_id, error_kind(&e), format!("cannot be resumed: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_from_planned_files_are_the_tasks_planned() {
        let tmp = tempfile::tempdir().unwrap();
        let text = super::super::tests::pipeline(tmp.path(), 1);
        let p = distillery_exec::stages::parse_pipeline("t.toml", &text, &[]).unwrap();
        let planned = plan_tasks(&p).unwrap();
        let again =
            plan_from_files(&p, planned.plan.files.clone(), planned.plan.side.clone()).unwrap();
        assert!(
            planned.tasks.len() > planned.plan.files.len(),
            "stage tasks too"
        );
        assert_eq!(again.tasks, planned.tasks);
        assert_eq!(again.plan.files, planned.plan.files);
        assert_eq!(again.plan.stages, planned.plan.stages);
        assert_eq!(again.plan.tables, planned.plan.tables);
        assert_eq!(again.plan.outputs, planned.plan.outputs);
        assert_eq!(again.plan.side, planned.plan.side);
        assert_eq!(again.plan.pipeline, p);
    }
}
