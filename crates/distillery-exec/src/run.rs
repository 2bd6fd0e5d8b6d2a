//! Running a pipeline on this machine: read every input file in parallel (each file on a
//! blocking thread, feeding an async Parquet writer through a bounded channel), check the
//! bad-record ratio, run the stages, then publish. Nothing is visible at the output location
//! until publishing; a failed run leaves the previous output as it was.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use distillery_core::spec::{InputSpec, Pipeline};
use distillery_core::summary::{Manifest, RunSummary};
use distillery_ingest::input::file_name;
use distillery_ingest::{InputCtx, read_input};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;
use tracing::{info, warn};

pub use crate::contract::StageOutput;

use crate::error::ExecError;
use crate::parts::{PartWriters, WrittenPart};
use crate::plan::{Plan, PlannedFile, plan};
use crate::sink::{BatchingSink, SinkCounts};
use crate::store::{Location, StoreOpener};

/// How a run reports progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// Progress bars when stderr is a terminal, plain log lines otherwise.
    Auto,
    /// Log lines only.
    Log,
    /// Nothing (tests).
    Quiet,
}

/// What a finished run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub summary: RunSummary,
    pub manifest: Manifest,
    pub output: String,
}

/// What one input file produced.
#[derive(Debug)]
pub(crate) struct FileResult {
    pub(crate) file: PlannedFile,
    pub(crate) counts: SinkCounts,
    pub(crate) parts: Vec<WrittenPart>,
    pub(crate) bytes_in: u64,
    pub(crate) seconds: f64,
}

/// The cores of this machine (2 when they cannot be read).
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

/// The threads a run uses: `run.parallelism`, or every core when it is 0.
pub fn parallelism(p: &Pipeline) -> usize {
    if p.run.parallelism == 0 {
        cores()
    } else {
        p.run.parallelism
    }
}

/// Reads one input file into sharded parts under `staging`.
pub(crate) async fn ingest_file(
    file: PlannedFile,
    input: InputSpec,
    p: &Pipeline,
    out: Location,
    staging: String,
    mode: ProgressMode,
) -> Result<FileResult, ExecError> {
    let started = Instant::now();
    let progress = Progress::new(mode);
    let (tx, mut rx) = mpsc::channel::<crate::sink::PartBatch>(8);
    let writer_out = out.clone();
    let tag = file.tag.clone();
    // Aborted when dropped: a file task dropped because another file failed takes its writer
    // down with it (its reader then stops at the closed channel); tickers never outlive their
    // file.
    let mut writer = AbortOnDropHandle::new(tokio::spawn(async move {
        let mut w = PartWriters::new(writer_out, &staging, &tag);
        while let Some(b) = rx.recv().await {
            w.write(b.table, b.shard, &b.batch).await?;
        }
        w.finish().await
    }));
    let counter = Arc::new(AtomicU64::new(0));
    let bar = progress.file_bar(&file);
    let _ticker = progress
        .spawn_ticker(&file, counter.clone(), bar.clone())
        .map(AbortOnDropHandle::new);
    let handle = tokio::runtime::Handle::current();
    let (shards, batch_size) = (p.run.shards, p.run.batch_size);
    let location = file.location.clone();
    let (format, index, range) = (file.format, file.index, file.range);
    let reader_counter = counter.clone();
    let reader = tokio::task::spawn_blocking(move || {
        let opener = StoreOpener::new(handle);
        let ctx = InputCtx {
            source: file_name(&location),
            location,
            file_index: index,
            split: input.split.clone(),
            options: &input.options,
            opener: &opener,
            bytes_read: reader_counter,
            range,
        };
        let mut sink = BatchingSink::new(shards, batch_size, tx);
        let read = read_input(format, &ctx, &mut sink);
        let flushed = sink.finish();
        read?;
        Ok::<_, ExecError>(flushed.map_err(distillery_ingest::IngestError::from)?)
    });
    let read = reader.await.map_err(|e| ExecError::Task(e.to_string()))?;
    let written = (&mut writer)
        .await
        .map_err(|e| ExecError::Task(e.to_string()))?;
    // A writer failure is the root cause of a reader's "sink closed": report it first.
    let parts = written?;
    let counts = read?;
    let bytes_in = file.size.unwrap_or_else(|| counter.load(Ordering::Relaxed));
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    progress.finish();
    info!(
        input = %file.input,
        file = %file.location,
        records = counts.good(),
        quarantined = counts.quarantined(),
        seconds = started.elapsed().as_secs_f64(),
        "input read"
    );
    if counts.quarantined() > 0 {
        warn!(file = %file.location, quarantined = counts.quarantined(), "bad records quarantined");
    }
    Ok(FileResult {
        file,
        counts,
        parts,
        bytes_in,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Progress reporting: bars on a terminal, periodic log lines otherwise.
#[derive(Clone)]
struct Progress {
    mode: ProgressMode,
    multi: Option<MultiProgress>,
}

impl Progress {
    fn new(mode: ProgressMode) -> Progress {
        let bars = mode == ProgressMode::Auto && std::io::stderr().is_terminal();
        Progress {
            mode,
            multi: bars.then(MultiProgress::new),
        }
    }

    fn file_bar(&self, file: &PlannedFile) -> Option<ProgressBar> {
        let multi = self.multi.as_ref()?;
        let bar = multi.add(ProgressBar::new(file.size.unwrap_or(0)));
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>14} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {wide_msg}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(file.tag.clone());
        bar.set_message(file_name(&file.location));
        Some(bar)
    }

    fn spawn_ticker(
        &self,
        file: &PlannedFile,
        counter: Arc<AtomicU64>,
        bar: Option<ProgressBar>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        if self.mode == ProgressMode::Quiet {
            return None;
        }
        let file = file.clone();
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(if bar.is_some() {
                Duration::from_millis(200)
            } else {
                Duration::from_secs(10)
            });
            tick.tick().await;
            loop {
                tick.tick().await;
                let n = counter.load(Ordering::Relaxed);
                match &bar {
                    Some(b) => b.set_position(n),
                    None => {
                        info!(input = %file.input, file = %file.location, bytes_read = n, "reading")
                    }
                }
            }
        }))
    }

    fn finish(&self) {
        if let Some(m) = &self.multi {
            let _ = m.clear();
        }
    }
}

/// A run id: UTC time plus a short hash of the pipeline and process, sortable by time.
pub fn new_run_id(pipeline_hash: &str) -> String {
    let now = SystemTime::now();
    let stamp = rfc3339(now).replace(['-', ':'], "");
    let nanos = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = distillery_core::id::stable_id(&[
        pipeline_hash,
        &std::process::id().to_string(),
        &nanos.to_string(),
    ]);
    format!("{}-{}", stamp.trim_end_matches('Z'), &salt[..8])
}

/// Formats a time as RFC 3339 UTC with second precision (`2026-12-07T01:02:03Z`).
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Plans a pipeline without running it (for `distillery plan`).
pub fn plan_pipeline(p: &Pipeline) -> Result<Plan, ExecError> {
    plan(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_times() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_795_000_000)),
            "2026-11-18T11:06:40Z"
        );
    }
}
