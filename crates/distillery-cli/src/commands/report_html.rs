//! `--format html` of `distillery report labels`: one self-contained HTML page for an output
//! (no script, no external file; charts as inline SVG) with what its tables and summary say:
//! the run and its stages' seconds, quarantine reasons, label F1 by method and by question
//! type, positives per question, the CIRAG cascade's granularity shares (Figure 3 of the
//! paper), subgraph edges per hop, and the index versions the run built. A section appears
//! only where the output has its data. Every charted number carries a `data-value`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use distillery_core::summary::{Manifest, RunSummary};
use distillery_core::{SubgraphEdge, TableKind};
use distillery_exec::publish::{read_manifest, read_summary};
use distillery_exec::store::{Location, open_location};
use distillery_label::report::LabelReport;

use super::report::{for_rows, label_report};

/// HTML-escapes text (`&`, `<`, `>`, `'`, `"`).
fn esc(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

/// A horizontal bar chart: one labelled bar per item, its value written after it.
fn bars(id: &str, items: &[(String, f64)], shown: impl Fn(f64) -> String) -> String {
    if items.is_empty() {
        return String::new();
    }
    let max = items.iter().map(|i| i.1).fold(0.0, f64::max).max(1e-12);
    let (label_w, bar_w, row_h) = (260.0, 420.0, 22.0);
    let mut svg = format!(
        "<svg class=\"chart\" id=\"{id}\" width=\"{:.0}\" height=\"{:.0}\" role=\"img\">",
        label_w + bar_w + 120.0,
        items.len() as f64 * row_h + 6.0
    );
    for (i, (label, v)) in items.iter().enumerate() {
        let y = i as f64 * row_h + 3.0;
        let w = (v / max * bar_w).max(if *v > 0.0 { 1.0 } else { 0.0 });
        let _ = write!(
            svg,
            "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\">{}</text>\
             <rect class=\"bar\" data-label=\"{}\" data-value=\"{v}\" x=\"{label_w}\" y=\"{y:.0}\" \
             width=\"{w:.1}\" height=\"{:.0}\" fill=\"#3b6ea8\"/>\
             <text x=\"{:.1}\" y=\"{:.0}\">{}</text>",
            label_w - 8.0,
            y + 14.0,
            esc(label),
            esc(label),
            row_h - 6.0,
            label_w + w + 6.0,
            y + 14.0,
            esc(&shown(*v)),
        );
    }
    svg.push_str("</svg>");
    svg
}

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

fn count(v: f64) -> String {
    format!("{v:.0}")
}

fn secs(v: f64) -> String {
    format!("{v:.2} s")
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;max-width:1100px}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.5em 0}th,td{padding:.2em .6em;border-bottom:1px solid #eee;text-align:right}\
th:first-child,td:first-child{text-align:left}svg text{font-size:12px}p.note{color:#555}";

fn section_run(b: &mut String, s: &RunSummary) {
    let _ = write!(
        b,
        "<p>pipeline <b>{}</b> · run <code>{}</code> · started {} · {:.1} s</p>",
        esc(&s.pipeline),
        esc(&s.run_id),
        esc(&s.started_at),
        s.seconds
    );
    b.push_str(
        "<h2>stages</h2><table id=\"stages\"><thead><tr><th>stage</th><th>records in</th>\
        <th>records out</th><th>quarantined</th><th>tasks</th><th>seconds</th></tr></thead><tbody>",
    );
    for st in &s.stages {
        let _ = write!(
            b,
            "<tr data-stage=\"{n}\"><td>{n}</td><td>{}</td><td class=\"records-out\" data-value=\"{}\">{}</td>\
             <td>{}</td><td>{}</td><td>{:.2}</td></tr>",
            st.records_in,
            st.records_out,
            st.records_out,
            st.quarantined,
            st.tasks.len(),
            st.seconds,
            n = esc(&st.stage),
        );
    }
    b.push_str(
        "</tbody></table><p class=\"note\">task seconds per stage, summed over its tasks:</p>",
    );
    let items: Vec<(String, f64)> = s
        .stages
        .iter()
        .map(|st| (st.stage.clone(), st.seconds))
        .collect();
    b.push_str(&bars("stage-seconds", &items, secs));
    if !s.quarantine_by_reason.is_empty() {
        b.push_str("<h2>quarantine</h2>");
        let items: Vec<(String, f64)> = s
            .quarantine_by_reason
            .iter()
            .map(|(r, n)| (r.clone(), *n as f64))
            .collect();
        b.push_str(&bars("quarantine", &items, count));
    }
    // Figure 3 of the CIRAG paper: the granularity each question's cascade settled on.
    for st in &s.stages {
        // The outcomes of `distillery_distill::cascade::Cascade::outcome`, coarse to fine.
        let shares: Vec<(String, u64)> = ["triples", "sentences", "passages", "default", "invalid"]
            .iter()
            .filter_map(|g| Some((g.to_string(), *st.counters.get(&format!("cascade.{g}"))?)))
            .collect();
        let total: u64 = shares.iter().map(|x| x.1).sum();
        if total == 0 {
            continue;
        }
        let _ = write!(
            b,
            "<h2>CIRAG cascade of <code>{}</code>: granularity chosen</h2>\
             <p class=\"note\">share of {total} questions</p>",
            esc(&st.stage)
        );
        let items: Vec<(String, f64)> = shares
            .iter()
            .map(|(g, n)| (g.clone(), 100.0 * *n as f64 / total as f64))
            .collect();
        b.push_str(&bars(&format!("cascade-{}", st.stage), &items, pct));
    }
}

fn section_labels(
    b: &mut String,
    r: &LabelReport,
    positives: &BTreeMap<String, BTreeMap<usize, u64>>,
) {
    b.push_str("<h2>weak positives against gold evidence</h2>");
    for (dataset, methods) in &r.datasets {
        for level in ["sentence", "paragraph"] {
            let items: Vec<(String, f64)> = methods
                .iter()
                .filter_map(|(m, mr)| Some((m.clone(), mr.levels.get(level)?.f1)))
                .collect();
            if items.is_empty() {
                continue;
            }
            let _ = write!(b, "<h3>{} · {level} F1 by method</h3>", esc(dataset));
            b.push_str(&bars(&format!("f1-{dataset}-{level}"), &items, pct));
        }
        let mut types: Vec<&String> = methods.values().flat_map(|m| m.by_type.keys()).collect();
        types.sort();
        types.dedup();
        if !types.is_empty() {
            let _ = write!(
                b,
                "<h3>{} · F1 by question type</h3><table class=\"by-type\"><thead><tr><th>type</th>",
                esc(dataset)
            );
            for m in methods.keys() {
                let _ = write!(
                    b,
                    "<th>{} sentence</th><th>{} paragraph</th>",
                    esc(m),
                    esc(m)
                );
            }
            b.push_str("</tr></thead><tbody>");
            for t in types {
                let _ = write!(b, "<tr><td>{}</td>", esc(t));
                for mr in methods.values() {
                    for level in ["sentence", "paragraph"] {
                        match mr.by_type.get(t).and_then(|l| l.get(level)) {
                            Some(p) => {
                                let _ = write!(b, "<td data-value=\"{}\">{:.1}</td>", p.f1, p.f1);
                            }
                            None => b.push_str("<td>–</td>"),
                        }
                    }
                }
                b.push_str("</tr>");
            }
            b.push_str("</tbody></table>");
        }
    }
    for (method, hist) in positives {
        let _ = write!(b, "<h3>positives per question · {}</h3>", esc(method));
        let items: Vec<(String, f64)> = hist
            .iter()
            .map(|(n, q)| (format!("{n} positives"), *q as f64))
            .collect();
        b.push_str(&bars(&format!("positives-{method}"), &items, count));
    }
}

async fn section_subgraphs(b: &mut String, loc: &Location, m: &Manifest) -> Result<()> {
    if m.table(TableKind::Subgraphs.name()).is_none() {
        return Ok(());
    }
    let mut per_hop: BTreeMap<u32, (u64, std::collections::HashSet<String>)> = BTreeMap::new();
    for_rows(loc, m, TableKind::Subgraphs, |e: SubgraphEdge| {
        let h = per_hop.entry(e.hop).or_default();
        h.0 += 1;
        h.1.insert(e.question_id);
    })
    .await?;
    b.push_str(
        "<h2>subgraph edges per hop</h2><table id=\"subgraph-hops\"><thead><tr><th>hop</th>\
        <th>edges</th><th>questions</th><th>edges per question</th></tr></thead><tbody>",
    );
    for (hop, (edges, qs)) in &per_hop {
        let _ = write!(
            b,
            "<tr><td>{hop}</td><td data-value=\"{edges}\">{edges}</td><td>{}</td><td>{:.1}</td></tr>",
            qs.len(),
            *edges as f64 / qs.len().max(1) as f64
        );
    }
    b.push_str("</tbody></table>");
    let items: Vec<(String, f64)> = per_hop
        .iter()
        .map(|(h, (e, _))| (format!("hop {h}"), *e as f64))
        .collect();
    b.push_str(&bars("subgraph-edges", &items, count));
    Ok(())
}

async fn section_indexes(b: &mut String, loc: &Location, m: &Manifest) -> Result<()> {
    let files: Vec<&str> = m
        .files
        .iter()
        .map(|f| f.path.as_str())
        .filter(|p| p.starts_with("indexes/") && p.ends_with(".json"))
        .collect();
    if files.is_empty() {
        return Ok(());
    }
    b.push_str(
        "<h2>indexes built</h2><table id=\"indexes\"><thead><tr><th>stage</th><th>root</th>\
        <th>version</th><th>kinds</th><th>passages</th><th>shards rebuilt / reused</th>\
        <th>KG nodes</th><th>KG edges</th><th>bytes</th></tr></thead><tbody>",
    );
    for f in files {
        let v: serde_json::Value = serde_json::from_slice(&loc.read(f).await?)?;
        let mf = &v["manifest"];
        let kinds: Vec<&str> = mf["kinds"]
            .as_array()
            .map(|k| k.iter().filter_map(|x| x.as_str()).collect())
            .unwrap_or_default();
        let bytes: u64 = mf["files"]
            .as_array()
            .map(|fs| fs.iter().filter_map(|x| x["bytes"].as_u64()).sum())
            .unwrap_or(0);
        let stage = f.trim_start_matches("indexes/").trim_end_matches(".json");
        let _ = write!(
            b,
            "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td>\
             <td class=\"passages\" data-value=\"{p}\">{p}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{bytes}</td></tr>",
            esc(stage),
            esc(v["root"].as_str().unwrap_or("")),
            esc(v["version"].as_str().unwrap_or("")),
            esc(&kinds.join(", ")),
            mf["shards_rebuilt"].as_u64().unwrap_or(0),
            mf["shards_reused"].as_u64().unwrap_or(0),
            mf["kg"]["nodes"].as_u64().unwrap_or(0),
            mf["kg"]["edges"].as_u64().unwrap_or(0),
            p = mf["passages"].as_u64().unwrap_or(0),
        );
    }
    b.push_str("</tbody></table>");
    Ok(())
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body>{body}</body></html>\n",
        esc(title)
    )
}

/// The page of a compound benchmark report (`report compound ... --format html`): accuracy
/// overall and per number of sub-questions.
pub fn compound_html(benchmark: &str, r: &serde_json::Value) -> String {
    let mut b = format!(
        "<h1>HANRAG compound accuracy · <code>{}</code></h1><p>accuracy <b id=\"accuracy\" \
         data-value=\"{a}\">{a:.2}%</b> over {} questions ({} without a prediction)</p>",
        esc(benchmark),
        r["questions"],
        r["missing"],
        a = r["accuracy"].as_f64().unwrap_or(0.0),
    );
    if let Some(h) = r["by_hops"].as_object() {
        b.push_str("<h2>by number of sub-questions</h2>");
        let items: Vec<(String, f64)> = h
            .iter()
            .map(|(n, v)| {
                (
                    format!("{n} sub-questions ({} questions)", v["questions"]),
                    v["accuracy"].as_f64().unwrap_or(0.0),
                )
            })
            .collect();
        b.push_str(&bars("by-hops", &items, pct));
    }
    page("compound accuracy", &b)
}

/// The HTML report of the output at `url`.
pub async fn output_html(url: &str) -> Result<String> {
    let loc = open_location(url, false)?;
    let manifest = read_manifest(&loc).await?;
    let mut b = format!("<h1>Distillery report · <code>{}</code></h1>", esc(url));
    if let Ok(s) = read_summary(&loc).await {
        section_run(&mut b, &s);
    }
    if manifest.table(TableKind::Labels.name()).is_some() {
        let (r, positives) = label_report(&loc, &manifest).await?;
        section_labels(&mut b, &r, &positives);
    }
    section_subgraphs(&mut b, &loc, &manifest).await?;
    section_indexes(&mut b, &loc, &manifest).await?;
    Ok(page(&format!("report · {url}"), &b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::summary::StageSummary;

    #[test]
    fn the_cascade_shares_are_charted_from_the_stage_counters() {
        let mut st = StageSummary::new("cirag");
        for (k, v) in [
            ("cascade.sentences", 3),
            ("cascade.passages", 1),
            ("cascade.sentences.hotpotqa", 3),
            ("cascade.samples", 9),
            ("cascade.wrong_answer", 2),
        ] {
            st.add(k, v);
        }
        let s = RunSummary {
            stages: vec![st],
            ..Default::default()
        };
        let mut b = String::new();
        section_run(&mut b, &s);
        let chart = &b[b.find("id=\"cascade-cirag\"").unwrap()..];
        assert!(
            chart.contains("data-label=\"sentences\" data-value=\"75\""),
            "{chart}"
        );
        assert!(
            chart.contains("data-label=\"passages\" data-value=\"25\""),
            "{chart}"
        );
        assert!(
            !chart.contains("samples") && !chart.contains("hotpotqa"),
            "{chart}"
        );
        assert!(b.contains("share of 4 questions"));
    }

    #[test]
    fn the_compound_page_charts_accuracy_per_hop_count() {
        let r = serde_json::json!({"questions": 3, "missing": 1, "accuracy": 50.0,
            "by_hops": {"2": {"questions": 2, "accuracy": 75.0}, "3": {"questions": 1, "accuracy": 0.0}}});
        let h = compound_html("bench.jsonl", &r);
        assert!(h.contains("id=\"accuracy\" data-value=\"50\""), "{h}");
        assert!(
            h.contains("data-label=\"2 sub-questions (2 questions)\" data-value=\"75\""),
            "{h}"
        );
        assert!(h.contains("<code>bench.jsonl</code>") && !h.contains("<script"));
    }
}
