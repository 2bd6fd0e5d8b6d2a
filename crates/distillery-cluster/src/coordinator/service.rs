//! The gRPC service: the tonic `Coordinator` implementation, each call handed to the file
//! that does it (registration is here), and how coordinator errors become gRPC statuses.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tonic::{Request, Response, Status};
use tracing::info;

use super::schedule::expire_now;
use super::status::TaskPage;
use super::{CoordinatorService, WorkerRt, now_ms};
use crate::{ClusterError, PROTOCOL_VERSION, pb};

fn status_err(e: ClusterError) -> Status {
    match e {
        ClusterError::Invalid(m) => Status::invalid_argument(m),
        ClusterError::Config(m) => Status::failed_precondition(m),
        e => Status::unavailable(e.to_string()),
    }
}

#[tonic::async_trait]
impl pb::coordinator_server::Coordinator for CoordinatorService {
    async fn register_worker(
        &self,
        req: Request<pb::RegisterWorkerRequest>,
    ) -> Result<Response<pb::RegisterWorkerResponse>, Status> {
        let r = req.into_inner();
        if r.protocol_version != PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "protocol version {} is not {PROTOCOL_VERSION}: upgrade the worker",
                r.protocol_version
            )));
        }
        if r.worker_id.is_empty() {
            return Err(Status::invalid_argument("empty worker id"));
        }
        let caps = r.capabilities.unwrap_or_default();
        info!(worker = %r.worker_id, slots = caps.slots, gpus = caps.gpus, "worker registered");
        let mut inner = self.lock();
        let prev = inner.workers.insert(
            r.worker_id.clone(),
            WorkerRt {
                caps,
                last_seen: Instant::now(),
                last_seen_ms: now_ms(),
                draining: false,
                attempts: HashSet::new(),
                abandon: Vec::new(),
            },
        );
        // A worker registering again under its id lost what it ran.
        if let Some(prev) = prev {
            expire_now(&mut inner, &prev.attempts);
        }
        Ok(Response::new(pb::RegisterWorkerResponse {
            protocol_version: PROTOCOL_VERSION,
            generation: self.generation,
            heartbeat_ms: self.cfg.heartbeat.as_millis() as u32,
            lease_ms: self.cfg.lease.as_millis() as u32,
        }))
    }

    async fn pull(
        &self,
        req: Request<pb::PullRequest>,
    ) -> Result<Response<pb::PullResponse>, Status> {
        let req = req.into_inner();
        let wait = Duration::from_millis(u64::from(req.wait_ms)).min(self.cfg.heartbeat);
        if wait.is_zero() || req.free_slots == 0 || req.draining {
            return self.pull_inner(req).map(Response::new);
        }
        // A long poll: held until a task is queued or `wait` passes. Armed before each look
        // at the queues, so a task queued in between is not missed.
        let deadline = tokio::time::Instant::now() + wait;
        let wake = self.lock().wake.clone();
        loop {
            let queued = wake.notified();
            tokio::pin!(queued);
            queued.as_mut().enable();
            let resp = self.pull_inner(req.clone())?;
            if !resp.tasks.is_empty()
                || !resp.abandon_attempts.is_empty()
                || self.pulls_released.load(Ordering::SeqCst)
            {
                return Ok(Response::new(resp));
            }
            if tokio::time::timeout_at(deadline, queued).await.is_err() {
                return Ok(Response::new(resp));
            }
        }
    }

    async fn complete_task(
        &self,
        req: Request<pb::CompleteTaskRequest>,
    ) -> Result<Response<pb::CompleteTaskResponse>, Status> {
        self.complete_inner(req.into_inner())
            .await
            .map(Response::new)
    }

    async fn fail_task(
        &self,
        req: Request<pb::FailTaskRequest>,
    ) -> Result<Response<pb::FailTaskResponse>, Status> {
        self.fail_inner(req.into_inner()).map(Response::new)
    }

    async fn submit_job(
        &self,
        req: Request<pb::SubmitJobRequest>,
    ) -> Result<Response<pb::SubmitJobResponse>, Status> {
        let r = req.into_inner();
        let job_id = self
            .submit(&r.pipeline_file, &r.pipeline_text, &r.overrides)
            .await
            .map_err(status_err)?;
        Ok(Response::new(pb::SubmitJobResponse { job_id }))
    }

    async fn get_job(
        &self,
        req: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::JobStatus>, Status> {
        let req = req.into_inner();
        let inner = self.lock();
        self.status_of(&inner, &req.job_id, TaskPage::of(&req))
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("no job {}", req.job_id)))
    }

    async fn cancel_job(
        &self,
        req: Request<pb::CancelJobRequest>,
    ) -> Result<Response<pb::JobStatus>, Status> {
        let id = req.into_inner().job_id;
        self.cancel(&id);
        let inner = self.lock();
        self.status_of(&inner, &id, TaskPage::NONE)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("no job {id}")))
    }

    async fn list_jobs(
        &self,
        _req: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let inner = self.lock();
        let mut ids: Vec<&String> = inner.jobs.keys().chain(inner.finals.keys()).collect();
        ids.sort();
        ids.dedup();
        let jobs = ids
            .into_iter()
            .filter_map(|id| self.status_of(&inner, id, TaskPage::NONE))
            .collect();
        Ok(Response::new(pb::ListJobsResponse { jobs }))
    }
}
