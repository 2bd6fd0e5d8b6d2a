//! `distillery report labels OUT --format html` on the quick start's output, in a real
//! headless browser: the page renders, its numbers are the summary's and the JSON report's,
//! and a screenshot is kept (`target/test-artefacts/report-quickstart.png`).

use super::*;
use distillery_testkit::browser::{artefact, browse, chromium};

/// The `data-value` of the first element holding `marker` (and a `data-value` after it).
fn value_after(dom: &str, marker: &str) -> Option<f64> {
    let at = dom.find(marker)?;
    let rest = &dom[at..];
    let v = rest.find("data-value=\"")? + 12;
    rest[v..v + rest[v..].find('"')?].parse().ok()
}

#[test]
fn the_html_report_of_the_quickstart_output_shows_its_numbers() {
    let Some(browser) = chromium() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("qs");
    let set = format!("output={}", out_dir.display());
    ok(&["run", "pipelines/quickstart.toml", "--set", &set]);
    let out = out_dir.to_str().unwrap();
    let html = ok(&["report", "labels", out, "--format", "html"]);
    assert!(
        html.starts_with("<!doctype html>") && !html.contains("<script"),
        "{html}"
    );
    let file = tmp.path().join("report.html");
    std::fs::write(&file, &html).unwrap();
    let dom = browse(
        &browser,
        &format!("file://{}", file.display()),
        &artefact("report-quickstart.png"),
    );

    // Every stage's records as the summary has them, and its seconds charted.
    let s = summary(&out_dir);
    for st in s["stages"].as_array().unwrap() {
        let name = st["stage"].as_str().unwrap();
        assert_eq!(
            value_after(&dom, &format!("<tr data-stage=\"{name}\">")),
            st["records_out"].as_f64(),
            "{name}"
        );
        assert!(
            dom.contains(&format!("data-label=\"{name}\"")),
            "{name} not charted"
        );
    }
    // F1 by method as the JSON report says (in percent there and here).
    let report: serde_json::Value =
        serde_json::from_str(&ok(&["report", "labels", out, "--format", "json"])).unwrap();
    let mut charted = 0;
    for (dataset, methods) in report.as_object().unwrap() {
        for (method, r) in methods.as_object().unwrap() {
            for level in ["sentence", "paragraph"] {
                let Some(f1) = r[level]["f1"].as_f64() else {
                    continue;
                };
                let chart = format!("id=\"f1-{dataset}-{level}\"");
                let chart_at = dom.find(&chart).unwrap_or_else(|| panic!("no {chart}"));
                let bar = value_after(&dom[chart_at..], &format!("data-label=\"{method}\""));
                assert!(
                    (bar.unwrap() - f1).abs() < 1e-9,
                    "{dataset} {method} {level}"
                );
                assert!((0.0..=100.0).contains(&f1), "{f1}");
                charted += 1;
            }
        }
    }
    assert!(charted >= 2, "{report}");
    // Positives per question add up to the questions labelled, per method.
    for method in ["answer-aware", "hseq-paper"] {
        let chart = &dom[dom.find(&format!("id=\"positives-{method}\"")).unwrap()..];
        let chart = &chart[..chart.find("</svg>").unwrap()];
        let total: f64 = chart
            .split("data-value=\"")
            .skip(1)
            .map(|v| v[..v.find('"').unwrap()].parse::<f64>().unwrap())
            .sum();
        let labelled: f64 = report
            .as_object()
            .unwrap()
            .values()
            .filter_map(|m| m[method]["questions"].as_f64())
            .sum();
        assert_eq!(total, labelled, "{method}");
    }
    // The index the run built.
    let passages = value_after(&dom, "class=\"passages\"").unwrap();
    let index = stage(&s, "index");
    assert_eq!(Some(passages), index["counters"]["passages"].as_f64());
}
