//! The job pages on the coordinator's HTTP port: `/` lists the jobs, `/jobs/<id>` shows one
//! (its stages with counts, throughput and ETA, the teacher's calls, quarantine by reason,
//! failed attempts, a timeline of attempts per worker, the workers). Plain server-rendered
//! HTML with an inline SVG chart; a running job's page reloads itself every two seconds.
//!
//! A job still in memory is shown from its runtime state; an older one (or every job after
//! a restart) from its final record and published summary, the records the state store
//! keeps. Numbers a test compares carry `data-value` attributes.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::Html;
use axum::routing::get;
use distillery_core::summary::{RunSummary, StageSummary};
use distillery_exec::task::{TaskDef, TaskKind};

use super::job::{AttemptState, JobRt, TaskState};
use super::status::job_state_name;
use super::{CoordinatorService, Inner, now_ms};

/// One stage's row.
#[derive(Debug, Default)]
struct StageRow {
    name: String,
    tasks: u64,
    done: u64,
    running: u64,
    attempts: u64,
    failed: u64,
    /// Counts of the committed tasks.
    s: StageSummary,
    /// First attempt start and last attempt end (Unix ms), for throughput and ETA.
    first_ms: i64,
    last_ms: i64,
}

/// One attempt on the timeline.
#[derive(Debug)]
struct Bar {
    worker: String,
    task: String,
    start_ms: i64,
    end_ms: i64,
    outcome: &'static str,
}

/// Everything a job page shows, gathered under the lock and rendered outside it.
#[derive(Debug, Default)]
struct JobView {
    id: String,
    pipeline: String,
    output: String,
    state: String,
    error: String,
    live: bool,
    stages: Vec<StageRow>,
    bars: Vec<Bar>,
    failures: Vec<(String, String, String, String)>,
    quarantine: BTreeMap<String, u64>,
    workers: Vec<(String, u32, u32, u32, i64, bool)>,
    from_record: bool,
}

/// The summary's name of a task's stage: `ingest/<input>` for ingest tasks.
fn stage_of(job: &JobRt, t: &TaskDef) -> String {
    match &t.kind {
        TaskKind::Ingest { file } => job
            .plan
            .plan
            .files
            .get(*file)
            .map_or_else(|| t.group.clone(), |f| format!("ingest/{}", f.input)),
        _ => t.group.clone(),
    }
}

fn live_view(job: &JobRt, v: &mut JobView) {
    let now = now_ms();
    let mut rows: HashMap<String, usize> = HashMap::new();
    for t in &job.tasks {
        let name = stage_of(job, &t.def);
        let i = *rows.entry(name.clone()).or_insert_with(|| {
            v.stages.push(StageRow {
                name,
                first_ms: i64::MAX,
                ..Default::default()
            });
            v.stages.len() - 1
        });
        let row = &mut v.stages[i];
        row.tasks += 1;
        match t.state {
            TaskState::Committed => row.done += 1,
            TaskState::Running => row.running += 1,
            _ => {}
        }
        if let Some(o) = job.committed.get(&t.def.id) {
            row.s.merge(&o.summary);
            if let Some(c) = &o.ingest {
                for (r, n) in &c.quarantine_by_reason {
                    *v.quarantine.entry(r.clone()).or_default() += n;
                }
            }
        }
        for a in &t.attempts {
            row.attempts += 1;
            row.first_ms = row.first_ms.min(a.started_ms);
            let end = if a.ended_ms > 0 { a.ended_ms } else { now };
            row.last_ms = row.last_ms.max(end);
            if matches!(
                a.state,
                AttemptState::Failed { .. } | AttemptState::Expired { .. }
            ) {
                row.failed += 1;
                v.failures.push((
                    t.def.id.clone(),
                    a.id.clone(),
                    a.worker.clone(),
                    a.state.error().to_string(),
                ));
            }
            v.bars.push(Bar {
                worker: a.worker.clone(),
                task: t.def.id.clone(),
                start_ms: a.started_ms,
                end_ms: end,
                outcome: a.state.name(),
            });
        }
    }
}

fn recorded_view(summary: &RunSummary, v: &mut JobView) {
    v.quarantine = summary.quarantine_by_reason.clone();
    for st in &summary.stages {
        let mut row = StageRow {
            name: st.stage.clone(),
            tasks: st.tasks.len() as u64,
            done: st.tasks.len() as u64,
            first_ms: i64::MAX,
            s: StageSummary {
                tasks: Vec::new(),
                ..st.clone()
            },
            ..Default::default()
        };
        for t in &st.tasks {
            row.attempts += u64::from(t.attempts);
            if t.started_ms > 0 {
                let end = t.started_ms + (t.seconds * 1000.0) as i64;
                row.first_ms = row.first_ms.min(t.started_ms);
                row.last_ms = row.last_ms.max(end);
                v.bars.push(Bar {
                    worker: t.worker.clone(),
                    task: t.task.clone(),
                    start_ms: t.started_ms,
                    end_ms: end,
                    outcome: "committed",
                });
            }
        }
        v.stages.push(row);
    }
}

impl CoordinatorService {
    /// The job pages, to serve beside `/metrics`.
    pub fn pages(&self) -> Router {
        let list = self.clone();
        let one = self.clone();
        Router::new()
            .route("/", get(move || async move { Html(list.jobs_page()) }))
            .route(
                "/jobs/{id}",
                get(move |Path(id): Path<String>| async move {
                    match one.job_page(&id) {
                        Some(html) => (StatusCode::OK, Html(html)),
                        None => (
                            StatusCode::NOT_FOUND,
                            Html(page(
                                "not found",
                                &format!("<p>no job {}</p>", esc(&id)),
                                false,
                            )),
                        ),
                    }
                }),
            )
    }

    fn view(&self, inner: &Inner, id: &str) -> Option<JobView> {
        let mut v = JobView {
            id: id.to_string(),
            ..Default::default()
        };
        if let Some(job) = inner.jobs.get(id) {
            v.pipeline = job.p.name.clone();
            v.output = job.p.output.clone();
            v.state = job.phase.name().to_string();
            v.error = job.phase.error().to_string();
            v.live = job.phase.is_live();
            live_view(job, &mut v);
        } else {
            let f = inner.finals.get(id)?;
            v.pipeline = f.pipeline.clone();
            v.output = f.output.clone();
            v.state = f.state.clone();
            v.error = f.error.clone();
            v.from_record = true;
            if let Ok(s) = serde_json::from_str::<RunSummary>(&f.summary_json) {
                recorded_view(&s, &mut v);
            }
        }
        let mut workers: Vec<_> = inner
            .workers
            .iter()
            .map(|(id, w)| {
                (
                    id.clone(),
                    w.caps.slots,
                    w.caps.gpus,
                    w.attempts.len() as u32,
                    w.last_seen_ms,
                    w.draining,
                )
            })
            .collect();
        workers.sort();
        v.workers = workers;
        Some(v)
    }

    /// The page of job `id`, if the coordinator knows it.
    pub fn job_page(&self, id: &str) -> Option<String> {
        let v = self.view(&self.lock(), id)?;
        Some(render_job(&v, now_ms()))
    }

    /// The list of jobs.
    pub fn jobs_page(&self) -> String {
        let mut rows: Vec<(String, String, String, String, u64, u64)> = Vec::new();
        {
            let inner = self.lock();
            for (id, job) in &inner.jobs {
                let done = job
                    .tasks
                    .iter()
                    .filter(|t| t.state == TaskState::Committed)
                    .count();
                rows.push((
                    id.clone(),
                    job.p.name.clone(),
                    job_state_name(job.phase.job_state()).to_string(),
                    job.p.output.clone(),
                    done as u64,
                    job.tasks.len() as u64,
                ));
            }
            for (id, f) in &inner.finals {
                if !inner.jobs.contains_key(id) {
                    let done = if f.state == "succeeded" {
                        f.tasks_total
                    } else {
                        0
                    };
                    rows.push((
                        id.clone(),
                        f.pipeline.clone(),
                        f.state.clone(),
                        f.output.clone(),
                        u64::from(done),
                        u64::from(f.tasks_total),
                    ));
                }
            }
        }
        let live = rows.iter().any(|r| r.2 == "running");
        let mut b = String::from(
            "<table><thead><tr><th>job</th><th>pipeline</th><th>state</th><th>tasks</th>\
             <th>output</th></tr></thead><tbody>",
        );
        for (id, pipeline, state, output, done, total) in rows.iter().rev() {
            let _ = write!(
                b,
                "<tr class=\"job\"><td><a href=\"/jobs/{id}\">{id}</a></td><td>{}</td>\
                 <td class=\"state {state}\">{state}</td><td>{done} / {total}</td><td>{}</td></tr>",
                esc(pipeline),
                esc(output),
                id = esc(id),
                state = esc(state),
            );
        }
        b.push_str("</tbody></table>");
        if rows.is_empty() {
            b = "<p>no jobs yet</p>".to_string();
        }
        page("jobs", &b, live)
    }
}

/// HTML-escapes text (`&`, `<`, `>`, `'`, `"`).
fn esc(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

/// A count, shortened for people (`12.3k`), with the exact value for programs.
fn num(cls: &str, v: u64) -> String {
    let shown = match v {
        0..=9_999 => v.to_string(),
        10_000..=9_999_999 => format!("{:.1}k", v as f64 / 1e3),
        _ => format!("{:.1}M", v as f64 / 1e6),
    };
    format!("<td class=\"{cls}\" data-value=\"{v}\">{shown}</td>")
}

fn bytes(cls: &str, v: u64) -> String {
    let shown = match v {
        0..=9_999 => format!("{v} B"),
        10_000..=9_999_999 => format!("{:.1} kB", v as f64 / 1e3),
        10_000_000..=9_999_999_999 => format!("{:.1} MB", v as f64 / 1e6),
        _ => format!("{:.2} GB", v as f64 / 1e9),
    };
    format!("<td class=\"{cls}\" data-value=\"{v}\">{shown}</td>")
}

fn secs(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:right}\
th:first-child,td:first-child{text-align:left}th{background:#f4f4f4}.state{font-weight:600}\
.bad{color:#b00;font-weight:600}td{white-space:nowrap}.err{font-family:monospace;white-space:pre-wrap;text-align:left}\
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.2em}svg text{font-size:11px}";

fn page(title: &str, body: &str, refresh: bool) -> String {
    let meta = if refresh {
        "<meta http-equiv=\"refresh\" content=\"2\">"
    } else {
        ""
    };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\">{meta}<title>{} · distillery</title>\
         <style>{STYLE}</style></head><body><p><a href=\"/\">jobs</a></p>{body}</body></html>",
        esc(title)
    )
}

fn stage_table(v: &JobView, now: i64) -> String {
    let mut b = String::from(
        "<table id=\"stages\"><thead><tr><th>stage</th><th>done</th><th>running</th><th>waiting</th>\
         <th>records in</th><th>records out</th><th>bytes in</th><th>bytes out</th>\
         <th>records/s</th><th>ETA</th><th>attempts</th><th>failed</th><th>quarantined</th>\
         <th>teacher calls</th><th>cache hits</th><th>tokens in</th><th>tokens out</th>\
         <th>refused</th></tr></thead><tbody>",
    );
    for r in &v.stages {
        let c = |k: &str| r.s.counters.get(k).copied().unwrap_or(0);
        let span_s = if r.first_ms < r.last_ms {
            (r.last_ms - r.first_ms) as f64 / 1000.0
        } else {
            0.0
        };
        let rate = if span_s > 0.0 {
            format!("{:.1}", r.s.records_out as f64 / span_s)
        } else {
            "–".into()
        };
        let eta = if r.done == r.tasks {
            "done".to_string()
        } else if r.done > 0 && r.first_ms < i64::MAX {
            let elapsed = (now - r.first_ms).max(0) as f64 / 1000.0;
            secs(elapsed / r.done as f64 * (r.tasks - r.done) as f64)
        } else {
            "–".into()
        };
        let _ = write!(
            b,
            "<tr class=\"stage\" data-stage=\"{name}\"><td>{name}</td>{}{}{}{}{}{}{}\
             <td>{rate}</td><td class=\"eta\">{eta}</td>{}{}{}{}{}{}{}{}</tr>",
            num("done", r.done),
            num("running", r.running),
            num("waiting", r.tasks - r.done - r.running),
            num("records-in", r.s.records_in),
            num("records-out", r.s.records_out),
            bytes("bytes-in", r.s.bytes_in),
            bytes("bytes-out", r.s.bytes_out),
            num("attempts", r.attempts),
            num(
                if r.failed > 0 {
                    "failures bad"
                } else {
                    "failures"
                },
                r.failed
            ),
            num("quarantined", r.s.quarantined),
            num("calls", c("llm.calls")),
            num("cache-hits", c("llm.cache_hits")),
            num("tokens-in", c("llm.tokens_in")),
            num("tokens-out", c("llm.tokens_out")),
            num("refused", c("llm.refused")),
            name = esc(&r.name),
        );
    }
    b.push_str("</tbody></table>");
    b
}

/// The timeline: one lane per worker slot in use, a bar per attempt.
fn timeline(v: &JobView) -> String {
    if v.bars.is_empty() {
        return "<p>no attempts yet</p>".into();
    }
    let t0 = v.bars.iter().map(|b| b.start_ms).min().unwrap_or(0);
    let t1 = v
        .bars
        .iter()
        .map(|b| b.end_ms)
        .max()
        .unwrap_or(t0)
        .max(t0 + 1);
    // Lanes: per worker, attempts placed greedily on the first lane free at their start.
    let mut by_worker: BTreeMap<&str, Vec<&Bar>> = BTreeMap::new();
    for b in &v.bars {
        by_worker.entry(&b.worker).or_default().push(b);
    }
    let (label_w, width, lane_h) = (140.0, 860.0, 16.0);
    let mut rows = String::new();
    let mut y = 0.0;
    for (worker, mut bars) in by_worker {
        bars.sort_by_key(|b| b.start_ms);
        let mut lanes: Vec<i64> = Vec::new();
        let mut placed = Vec::new();
        for b in bars {
            let lane = match lanes.iter().position(|end| *end <= b.start_ms) {
                Some(i) => i,
                None => {
                    lanes.push(0);
                    lanes.len() - 1
                }
            };
            lanes[lane] = b.end_ms;
            placed.push((lane, b));
        }
        let _ = write!(
            rows,
            "<text x=\"0\" y=\"{:.0}\">{}</text>",
            y + 12.0,
            esc(worker)
        );
        for (lane, b) in placed {
            let x = label_w + (b.start_ms - t0) as f64 / (t1 - t0) as f64 * width;
            let w = ((b.end_ms - b.start_ms) as f64 / (t1 - t0) as f64 * width).max(1.5);
            let color = match b.outcome {
                "committed" => "#3a7d44",
                "running" => "#2f6fb3",
                "failed" | "expired" => "#c0392b",
                _ => "#999",
            };
            let _ = write!(
                rows,
                "<rect class=\"attempt {cls}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" \
                 fill=\"{color}\"><title>{} · {o} · {}</title></rect>",
                y + lane as f64 * lane_h + 2.0,
                lane_h - 3.0,
                esc(&b.task),
                secs((b.end_ms - b.start_ms) as f64 / 1000.0),
                o = b.outcome,
                cls = b.outcome.replace(' ', "-"),
            );
        }
        y += lanes.len().max(1) as f64 * lane_h + 6.0;
    }
    let mut axis = String::new();
    for i in 0..=4 {
        let x = label_w + width * f64::from(i) / 4.0;
        let at = (t1 - t0) as f64 / 1000.0 * f64::from(i) / 4.0;
        let _ = write!(
            axis,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"0\" y2=\"{y:.0}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{x:.1}\" y=\"{:.0}\" text-anchor=\"middle\" fill=\"#666\">{}</text>",
            y + 14.0,
            secs(at)
        );
    }
    format!(
        "<svg id=\"timeline\" width=\"{:.0}\" height=\"{:.0}\" role=\"img\">{axis}{rows}</svg>\
         <p>{} from the first attempt's start to the last one's end; green committed, blue \
         running, red failed or expired, grey abandoned or given back.</p>",
        label_w + width + 30.0,
        y + 20.0,
        secs((t1 - t0) as f64 / 1000.0),
    )
}

fn render_job(v: &JobView, now: i64) -> String {
    let mut b = format!(
        "<h1>job <code>{}</code></h1><p>pipeline <b>{}</b> · output <code>{}</code> · \
         <span class=\"state\" id=\"job-state\">{}</span></p>",
        esc(&v.id),
        esc(&v.pipeline),
        esc(&v.output),
        esc(&v.state),
    );
    let (done, total): (u64, u64) = v
        .stages
        .iter()
        .fold((0, 0), |(d, t), r| (d + r.done, t + r.tasks));
    let first = v
        .stages
        .iter()
        .map(|r| r.first_ms)
        .min()
        .unwrap_or(i64::MAX);
    let last = v.stages.iter().map(|r| r.last_ms).max().unwrap_or(0);
    let _ = write!(
        b,
        "<p>tasks <b id=\"tasks-done\" data-value=\"{done}\">{done}</b> of \
         <b id=\"tasks-total\" data-value=\"{total}\">{total}</b> done"
    );
    if first < last {
        let _ = write!(
            b,
            " · {} from the first attempt",
            secs((last - first) as f64 / 1000.0)
        );
    }
    b.push_str("</p>");
    if !v.error.is_empty() {
        let _ = write!(b, "<p class=\"err\" id=\"job-error\">{}</p>", esc(&v.error));
    }
    if v.from_record {
        b.push_str("<p>shown from the job's final record and published summary</p>");
    }
    b.push_str("<h2>stages</h2>");
    b.push_str(&stage_table(v, now));
    b.push_str("<h2>timeline</h2>");
    b.push_str(&timeline(v));
    if !v.quarantine.is_empty() {
        b.push_str("<h2>quarantine</h2><table id=\"quarantine\"><tbody>");
        for (r, n) in &v.quarantine {
            let _ = write!(b, "<tr><td>{}</td>{}</tr>", esc(r), num("count", *n));
        }
        b.push_str("</tbody></table>");
    }
    if !v.failures.is_empty() {
        b.push_str(
            "<h2>failed attempts</h2><table id=\"failures\"><thead><tr><th>task</th><th>attempt</th>\
             <th>worker</th><th>error</th></tr></thead><tbody>",
        );
        for (task, attempt, worker, error) in &v.failures {
            let _ = write!(
                b,
                "<tr class=\"failure\"><td>{}</td><td>{}</td><td>{}</td><td class=\"err\">{}</td></tr>",
                esc(task),
                esc(attempt),
                esc(worker),
                esc(error)
            );
        }
        b.push_str("</tbody></table>");
    }
    b.push_str(
        "<h2>workers</h2><table id=\"workers\"><thead><tr><th>worker</th><th>slots</th><th>gpus</th>\
         <th>running</th><th>last pull</th><th>draining</th></tr></thead><tbody>",
    );
    for (id, slots, gpus, running, seen, draining) in &v.workers {
        let _ = write!(
            b,
            "<tr class=\"worker\"><td>{}</td><td>{slots}</td><td>{gpus}</td><td>{running}</td>\
             <td>{} ago</td><td>{}</td></tr>",
            esc(id),
            secs((now - seen).max(0) as f64 / 1000.0),
            if *draining { "yes" } else { "no" },
        );
    }
    b.push_str("</tbody></table>");
    page(&format!("job {}", v.id), &b, v.live)
}
