//! `distillery report compound BENCHMARK PREDICTIONS`: HANRAG's accuracy on the compound
//! benchmark a `compound` stage wrote (`<stage>/benchmark/<split>.jsonl`): per question, the
//! share of its answer's entities (one per sub-question) the prediction contains
//! ([`distillery_distill::compound::accuracy`]), averaged over the benchmark's questions and
//! per hop count. Predictions are JSON lines `{"id", "prediction"}`; a benchmark question
//! without a prediction scores 0 and is counted as missing.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use distillery_distill::compound::accuracy;
use serde_json::{Value, json};

use crate::args::ReportFormat;
use crate::out::out;

/// The JSON lines of a local file, each with its 1-based line number.
fn lines(path: &str) -> Result<Vec<(usize, Value)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map(|v| (i + 1, v))
                .with_context(|| format!("{path}, line {}: not JSON", i + 1))
        })
        .collect()
}

/// The report as JSON: `{questions, missing, accuracy, by_hops: {n: {questions, accuracy}}}`
/// (accuracies in percent).
pub fn compound_report(benchmark: &str, predictions: &str) -> Result<Value> {
    let mut predicted: HashMap<String, String> = HashMap::new();
    for (n, v) in lines(predictions)? {
        let (Some(id), Some(p)) = (v["id"].as_str(), v["prediction"].as_str()) else {
            bail!("{predictions}, line {n}: needs string fields `id` and `prediction`");
        };
        predicted.insert(id.to_string(), p.to_string());
    }
    let (mut total, mut missing) = (0.0, 0u64);
    let mut questions = 0u64;
    let mut by_hops: BTreeMap<usize, (u64, f64)> = BTreeMap::new();
    for (n, v) in lines(benchmark)? {
        let id = v["id"].as_str();
        let answers: Option<Vec<String>> = v["answers"].as_array().map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        });
        let (Some(id), Some(answers)) = (id, answers) else {
            bail!(
                "{benchmark}, line {n}: needs `id` and an `answers` list (a compound benchmark line)"
            );
        };
        let score = match predicted.get(id) {
            Some(p) => accuracy(p, &answers),
            None => {
                missing += 1;
                0.0
            }
        };
        questions += 1;
        total += score;
        let e = by_hops.entry(answers.len()).or_default();
        e.0 += 1;
        e.1 += score;
    }
    let pct = |sum: f64, n: u64| if n == 0 { 0.0 } else { 100.0 * sum / n as f64 };
    Ok(json!({
        "questions": questions,
        "missing": missing,
        "accuracy": pct(total, questions),
        "by_hops": by_hops.iter().map(|(h, (n, s))| (h.to_string(), json!({
            "questions": n, "accuracy": pct(*s, *n),
        }))).collect::<serde_json::Map<_, _>>(),
    }))
}

/// `distillery report compound BENCHMARK PREDICTIONS [--format table|json|html]`.
pub fn run(benchmark: &str, predictions: &str, format: ReportFormat) -> Result<ExitCode> {
    let r = compound_report(benchmark, predictions)?;
    match format {
        ReportFormat::Json => out!("{}", serde_json::to_string_pretty(&r)?),
        ReportFormat::Html => out!("{}", super::report_html::compound_html(benchmark, &r)),
        ReportFormat::Table => {
            out!(
                "compound accuracy {:.2}% over {} questions ({} without a prediction)",
                r["accuracy"].as_f64().unwrap_or(0.0),
                r["questions"],
                r["missing"]
            );
            if let Some(h) = r["by_hops"].as_object() {
                for (hops, v) in h {
                    out!(
                        "  {hops} sub-questions: {:.2}% over {}",
                        v["accuracy"].as_f64().unwrap_or(0.0),
                        v["questions"]
                    );
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
