//! CPU time per phase of the stage (`phase_us.<phase>`): the [`Phase`]s, the clock the
//! stage's threads add their measured time to, and the turning of a chunk's monotonic-clock
//! laps into CPU time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use distillery_core::cpu::process_time;
use distillery_core::summary::StageSummary;
use distillery_label::Phases;

/// The phases of the stage whose CPU time the summary reports (`phase_us.<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading and decoding the staged contexts (documents, tables, KB triples), turning the
    /// question batches into records, and gathering each question's context records (the KB
    /// neighbourhood included).
    Read,
    /// Building each question's S_h, its candidate stream and the per-segment work the methods
    /// share (`positives::Prepared`).
    Hseq,
    /// The weak positives of every method and their trajectories.
    Label,
    /// Rendering the SFT samples (iteration-agent prompts, HANRAG samples).
    Samples,
    /// Everything else the stage did: content hashes, decontamination, JSONL lines,
    /// deduplication, the Parquet parts (building, encoding, compressing, uploading), the
    /// JSONL files, the report, loading the labeller, the Parquet decoding of the question
    /// parts (it runs inside the stream's polls), and the runtime's own work.
    Write,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Read => "read",
            Phase::Hseq => "hseq",
            Phase::Label => "label",
            Phase::Samples => "samples",
            Phase::Write => "write",
        }
    }
}

/// The phases measured directly; [`Phase::Write`] is the rest.
const MEASURED: [Phase; 4] = [Phase::Read, Phase::Hseq, Phase::Label, Phase::Samples];

/// CPU time spent in each of the [`MEASURED`] phases, summed over the stage's threads (shared
/// by its tasks); [`Phase::Write`] is what the process used besides.
#[derive(Debug)]
pub(super) struct PhaseClock {
    /// The process's CPU time when the stage started.
    started: Duration,
    /// Per phase of [`MEASURED`], in its order.
    nanos: [AtomicU64; MEASURED.len()],
}

impl PhaseClock {
    pub(super) fn new() -> PhaseClock {
        PhaseClock {
            started: process_time(),
            nanos: Default::default(),
        }
    }

    /// Adds CPU time to one of the [`MEASURED`] phases ([`Phase::Write`] is the rest).
    pub(super) fn add(&self, phase: Phase, d: Duration) {
        debug_assert!(phase != Phase::Write, "write is not measured directly");
        let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if let Some(i) = MEASURED.iter().position(|&p| p == phase) {
            self.nanos[i].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The phases of [`distillery_label::Labeller::label_question`].
    pub(super) fn add_question(&self, p: &Phases) {
        self.add(Phase::Hseq, p.hseq);
        self.add(Phase::Label, p.label);
        self.add(Phase::Samples, p.samples);
    }

    /// Adds `phase_us.<name>` counters to `s`: the [`MEASURED`] phases, and as `write` the rest
    /// of the CPU time the process used since the stage started.
    pub(super) fn report(&self, s: &mut StageSummary) {
        self.report_of(process_time().saturating_sub(self.started), s);
    }

    /// [`PhaseClock::report`] for a process CPU time of `total` (never below the phases
    /// measured: `write` is then zero).
    pub(super) fn report_of(&self, total: Duration, s: &mut StageSummary) {
        let mut measured = 0u64;
        for (p, n) in MEASURED.iter().zip(&self.nanos) {
            let nanos = n.load(Ordering::Relaxed);
            measured = measured.saturating_add(nanos);
            s.add(&format!("phase_us.{}", p.name()), nanos / 1_000);
        }
        let total = u64::try_from(total.as_nanos()).unwrap_or(u64::MAX);
        let rest = total.saturating_sub(measured);
        s.add(&format!("phase_us.{}", Phase::Write.name()), rest / 1_000);
    }
}

/// The CPU time of monotonic-clock laps taken on one thread over an interval of `wall` in which
/// the thread used `cpu`: each lap times the CPU-to-wall ratio (at most 1, as a thread runs on
/// one core at a time; 1 when no time passed), so a thread that lost its core part of the
/// time has that part taken off its laps in proportion to their lengths. The laps stay within
/// `cpu`; what they leave of it (the thread's untimed work) is counted with `write`.
pub(super) fn to_cpu(
    cpu: Duration,
    wall: Duration,
    read: Duration,
    phases: Phases,
) -> (Duration, Phases) {
    let ratio = if wall.is_zero() {
        1.0
    } else {
        (cpu.as_secs_f64() / wall.as_secs_f64()).min(1.0)
    };
    (read.mul_f64(ratio), phases.scaled(ratio))
}
