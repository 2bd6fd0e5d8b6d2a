//! Running a pipeline on this machine: read every input file in parallel (each file on a
//! blocking thread, feeding async Parquet writers, one per thread of the run, through bounded
//! channels), check the
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
    let (tx, rx) = mpsc::channel::<crate::sink::PartBatch>(8);
    let writers = part_writer_tasks(parallelism(p), p.run.shards);
    // Aborted when dropped: a file task dropped because another file failed takes its writer
    // down with it (its reader then stops at the closed channel); tickers never outlive their
    // file.
    let mut writer = AbortOnDropHandle::new(tokio::spawn(write_parts(
        rx,
        out.clone(),
        staging,
        file.tag.clone(),
        writers,
    )));
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

/// The Parquet writer tasks of one input file: one per thread of the run, at most one per
/// shard. Encoding and compressing the parts is some 40% of a Freebase ingest's work; in one
/// task it fell behind the parser threads on two cores, which then waited on it.
fn part_writer_tasks(parallelism: usize, shards: u32) -> usize {
    parallelism.min(shards as usize).max(1)
}

/// Writes the batches of `rx` into the parts of one file under `staging`, each (table, shard)
/// part by one of `tasks` writer tasks (shard `s` by task `s % tasks`, so a part's batches keep
/// their order), which share the buffer budget of one [`PartWriters`]. The parts in (table,
/// shard) order.
async fn write_parts(
    mut rx: mpsc::Receiver<crate::sink::PartBatch>,
    out: Location,
    staging: String,
    tag: String,
    tasks: usize,
) -> Result<Vec<WrittenPart>, ExecError> {
    let budget = crate::parts::PART_BUFFER_BYTES / tasks;
    let mut senders = Vec::with_capacity(tasks);
    let mut handles = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        let (tx, mut task_rx) = mpsc::channel::<crate::sink::PartBatch>(8usize.div_ceil(tasks));
        let mut w = PartWriters::new(out.clone(), &staging, &tag).with_budget(budget);
        senders.push(tx);
        handles.push(AbortOnDropHandle::new(tokio::spawn(async move {
            while let Some(b) = task_rx.recv().await {
                w.write(b.table, b.shard, &b.batch).await?;
            }
            w.finish().await
        })));
    }
    while let Some(b) = rx.recv().await {
        let to = b.shard as usize % tasks;
        // A closed task failed: its error is reported below.
        if senders[to].send(b).await.is_err() {
            break;
        }
    }
    drop(senders);
    let mut parts = Vec::new();
    for h in handles {
        parts.extend(h.await.map_err(|e| ExecError::Task(e.to_string()))??);
    }
    parts.sort_by_key(|p| (p.table, p.shard));
    Ok(parts)
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
    use distillery_core::TableKind;
    use distillery_core::record::Triple;

    /// Batches of `triples` for shards 0-4, interleaved, three a shard, each naming its shard
    /// and place.
    fn batches() -> Vec<crate::sink::PartBatch> {
        let mut out = Vec::new();
        for round in 0..3 {
            for shard in 0..5u32 {
                let rows: Vec<Triple> = (0..4)
                    .map(|i| Triple {
                        id: format!("s{shard}-r{round}-{i}"),
                        subject: format!("m.{shard}"),
                        predicate: "p".into(),
                        object: format!("o{round}{i}"),
                        object_kind: "entity".into(),
                        ..Default::default()
                    })
                    .collect();
                let refs: Vec<&Triple> = rows.iter().collect();
                out.push(crate::sink::PartBatch {
                    table: TableKind::Triples,
                    shard,
                    batch: distillery_core::schema::triples_batch(TableKind::Triples, &refs)
                        .unwrap(),
                });
            }
        }
        out
    }

    /// The parts `write_parts` writes with `tasks` writer tasks, and every part's ids in order.
    async fn written(tasks: usize) -> Vec<(u32, u64, Vec<String>)> {
        let dir = tempfile::tempdir().unwrap();
        let loc = crate::store::open_location(dir.path().to_str().unwrap(), true).unwrap();
        let (tx, rx) = mpsc::channel(8);
        let writer = tokio::spawn(write_parts(
            rx,
            loc.clone(),
            "staging".into(),
            "t-0000".into(),
            tasks,
        ));
        for b in batches() {
            tx.send(b).await.unwrap();
        }
        drop(tx);
        let parts = writer.await.unwrap().unwrap();
        let mut out = Vec::new();
        for p in parts {
            assert_eq!(p.table, TableKind::Triples);
            let mut ids = Vec::new();
            for b in crate::parts::read_part_all(&loc, &format!("{}/{}", p.base, p.rel))
                .await
                .unwrap()
            {
                let col = b.column_by_name("id").unwrap();
                let col = col
                    .as_any()
                    .downcast_ref::<arrow::array::StringArray>()
                    .unwrap();
                ids.extend(col.iter().map(|v| v.unwrap().to_string()));
            }
            out.push((p.shard, p.rows, ids));
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parts_are_the_same_with_one_writer_task_or_several() {
        let one = written(1).await;
        assert_eq!(one.len(), 5);
        for (shard, rows, ids) in &one {
            assert_eq!(*rows, 12);
            // A part keeps its batches in the order they came.
            let want: Vec<String> = (0..3)
                .flat_map(|r| (0..4).map(move |i| format!("s{shard}-r{r}-{i}")))
                .collect();
            assert_eq!(ids, &want);
        }
        assert_eq!(written(3).await, one);
        assert_eq!(written(7).await, one);
        assert_eq!(part_writer_tasks(2, 16), 2);
        assert_eq!(part_writer_tasks(8, 1), 1);
        assert_eq!(part_writer_tasks(1, 16), 1);
    }

    /// A writer task that fails ends the file with its error, not a hang.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_writer_task_ends_the_file_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("blocker"), b"a file, not a directory").unwrap();
        let loc = crate::store::open_location(dir.path().to_str().unwrap(), false).unwrap();
        let (tx, rx) = mpsc::channel(8);
        let writer = tokio::spawn(write_parts(
            rx,
            loc,
            "blocker/staging".into(),
            "t-0000".into(),
            2,
        ));
        for b in batches() {
            if tx.send(b).await.is_err() {
                break;
            }
        }
        drop(tx);
        let err = writer.await.unwrap().unwrap_err().to_string();
        assert!(err.contains("blocker/staging/triples/part-0000"), "{err}");
    }

    #[test]
    fn rfc3339_formats_known_times() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_795_000_000)),
            "2026-11-18T11:06:40Z"
        );
    }
}
