//! The stage's unit tests: decontamination, JSONL lines, splits, `dataset_info.json`, the
//! phase clock and the shard writers.

use std::time::Duration;

use distillery_core::summary::StageSummary;
use distillery_core::{LabelRecord, SftSample};
use distillery_label::{LabelOptions, Phases};
use serde_json::Value;

use super::Decontaminator;
use super::clock::{Phase, PhaseClock, to_cpu};
use super::writers::{Rows, ShardWriter};
use crate::kit::jsonl::{JsonlLines, content_hash};
use crate::kit::jsonl::{dataset_info, jsonl_line, split_of};
use crate::parts::PartWriters;
use distillery_core::Message;
use serde_json::json;

#[tokio::test]
async fn a_task_without_the_planned_evaluation_files_fails() {
    let opts = LabelOptions {
        split: distillery_core::spec::SftSplit {
            decontaminate: vec!["/evals/*.json".into()],
            ..Default::default()
        },
        ..LabelOptions::default()
    };
    let Err(e) = crate::kit::decontam::load(
        &opts.split.decontaminate,
        &opts.split.decontaminate_formats,
        &[],
    )
    .await
    else {
        panic!("a task without its evaluation files ran");
    };
    assert!(e.to_string().contains("older coordinator"), "{e}");
    // Without `decontaminate`, no side file is needed.
    let none = crate::kit::decontam::load(&[], &[], &[]).await;
    assert_eq!(none.unwrap().len(), 0);
}

fn sample(user: &str) -> SftSample {
    SftSample {
        id: "s1".into(),
        task: "hseq_iteration".into(),
        messages: vec![
            Message {
                role: "system".into(),
                content: "Pick segments.".into(),
            },
            Message {
                role: "user".into(),
                content: user.into(),
            },
            Message {
                role: "assistant".into(),
                content: "{\"type\": \"select\"}".into(),
            },
        ],
        weight: 1.0,
        params: "{\"k\": 2, \"a\": [1]}".into(),
        step: Some(1),
        ..Default::default()
    }
}

/// A write that fails in a shard writer's task comes back from the stage's side: here
/// the staging directory lies under a regular file, so closing the part fails.
#[tokio::test]
async fn shard_writer_errors_reach_the_consumer() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blocker"), b"a file, not a directory").unwrap();
    let loc = crate::store::open_location(dir.path().to_str().unwrap(), false).unwrap();
    let parts = PartWriters::new(loc.clone(), "blocker/staging", "hotpot-0000");
    let rows = || {
        Rows::Labels(vec![LabelRecord {
            id: "l1".into(),
            ..Default::default()
        }])
    };
    let mut w = ShardWriter::spawn(parts, 3);
    w.send(rows()).await.unwrap();
    let err = w.finish().await.unwrap_err().to_string();
    assert!(
        err.contains("blocker/staging/labels/part-00003-hotpot-0000.parquet"),
        "{err}"
    );

    // The same rows in a writable place give one part with one row.
    let parts = PartWriters::new(loc, "ok", "hotpot-0000");
    let mut w = ShardWriter::spawn(parts, 3);
    w.send(rows()).await.unwrap();
    let written = w.finish().await.unwrap();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].rows, 1);
}

/// `write` is the process time the measured phases leave, never below zero.
#[test]
fn phase_clock_reports_the_rest_as_write() {
    let clock = PhaseClock::new();
    clock.add(Phase::Read, Duration::from_micros(100));
    clock.add(Phase::Hseq, Duration::from_micros(20));
    clock.add(Phase::Label, Duration::from_micros(30));
    clock.add(Phase::Label, Duration::from_micros(5));
    clock.add(Phase::Samples, Duration::from_micros(40));
    let mut s = StageSummary::new("label");
    clock.report_of(Duration::from_micros(1_000), &mut s);
    let us = |p: &str| s.counters[&format!("phase_us.{p}")];
    assert_eq!(
        [
            us("read"),
            us("hseq"),
            us("label"),
            us("samples"),
            us("write")
        ],
        [100, 20, 35, 40, 805]
    );
    let mut s = StageSummary::new("label");
    clock.report_of(Duration::from_micros(150), &mut s);
    assert_eq!(s.counters["phase_us.write"], 0);
    assert_eq!(s.counters["phase_us.samples"], 40);
}

/// A chunk's laps keep their proportions, get the thread's CPU time when it lost its core
/// part of the time, and never add up to more than the CPU time of the chunk.
#[test]
fn laps_become_cpu_time_in_proportion() {
    let ms = Duration::from_millis;
    let laps = Phases {
        hseq: ms(8),
        label: ms(20),
        samples: ms(8),
    };
    let sum = |(read, p): (Duration, Phases)| read + p.hseq + p.label + p.samples;
    // 30 ms of CPU in 40 ms: every lap times 0.75.
    let (read, p) = to_cpu(ms(30), ms(40), ms(4), laps);
    assert_eq!(
        (read, p.hseq, p.label, p.samples),
        (ms(3), ms(6), ms(15), ms(6))
    );
    assert_eq!(sum((read, p)), ms(30));
    // Laps that leave part of the interval untimed leave it to `write`.
    assert_eq!(sum(to_cpu(ms(60), ms(80), ms(4), laps)), ms(30));
    // A CPU reading ahead of the wall clock never makes the laps longer.
    assert_eq!(sum(to_cpu(ms(41), ms(40), ms(4), laps)), ms(40));
    assert_eq!(sum(to_cpu(ms(1), Duration::ZERO, ms(4), laps)), ms(40));
}

#[test]
fn decontamination_finds_questions_inside_prompts() {
    let mut d = Decontaminator::default();
    d.add("Which city hosted the 1992 Summer Olympics?");
    d.add("Who?");
    assert_eq!(d.len(), 2);
    let s = sample("### Question\nwhich CITY hosted the 1992 summer Olympics\n### Guidance");
    assert!(d.touches("unrelated question here", &s));
    assert!(!d.touches("unrelated", &sample("Which city hosted the 1996 Olympics?")));
    // Short questions only match the sample's own question, exactly.
    assert!(!d.touches("unrelated", &sample("who is it")));
    assert!(d.touches("Who", &sample("anything")));
    // Whole words only.
    assert!(!d.contained_in("xwhich city hosted the 1992 summer olympics"));
    assert!(!Decontaminator::default().touches("Who?", &s));
}

#[test]
fn jsonl_lines_keep_key_order_and_params_as_an_object() {
    let line = jsonl_line(&sample("q"));
    assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
    let v: Value = serde_json::from_str(&line).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "id",
            "messages",
            "weight",
            "task",
            "dataset",
            "question_id",
            "segment_ids",
            "method",
            "params",
            "template_id",
            "template_version",
            "pipeline_hash",
            "step",
            "steps",
            "sufficient",
            "prompt_tokens",
            "target_tokens",
            "teacher",
            "cache_entries",
            "revisions"
        ]
    );
    assert_eq!(v["params"]["k"], 2);
    assert_eq!(v["messages"][1]["role"], "user");
    assert!(v["steps"].is_null());
}

/// The line as `serde_json` writes the same object (the reference of [`JsonlLines`]).
fn serde_line(s: &SftSample) -> String {
    let params = serde_json::from_str::<Value>(&s.params).unwrap_or_else(|_| json!(s.params));
    let mut v = serde_json::to_string(&json!({
        "id": s.id, "messages": s.messages, "weight": s.weight, "task": s.task,
        "dataset": s.dataset, "question_id": s.question_id, "segment_ids": s.segment_ids,
        "method": s.method, "params": params, "template_id": s.template_id,
        "template_version": s.template_version, "pipeline_hash": s.pipeline_hash,
        "step": s.step, "steps": s.steps, "sufficient": s.sufficient,
        "prompt_tokens": s.prompt_tokens, "target_tokens": s.target_tokens,
        "teacher": s.teacher, "cache_entries": s.cache_entries, "revisions": s.revisions,
    }))
    .unwrap();
    v.push('\n');
    v
}

#[test]
fn jsonl_lines_are_what_serde_json_writes() {
    // Every byte below 0x80 and some above, in pseudo-random strings of every length up
    // to 40 (so escapes fall at every offset of the eight-byte words).
    let alphabet: Vec<char> = (0u8..0x80)
        .map(char::from)
        .chain("é€😀\u{2028}ÿ".chars())
        .collect();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut lines = JsonlLines::default();
    for n in 0..2000 {
        let len = n % 41;
        let text: String = (0..len)
            .map(|_| alphabet[next() as usize % alphabet.len()])
            .collect();
        let mut s = sample(&text);
        s.id = text.chars().rev().collect();
        s.segment_ids = vec![text.clone(), "p1".into()];
        s.weight = [1.0, 0.5, 1.0 / 3.0, 1e-7, f64::NAN][n % 5];
        s.step = (n % 3 > 0).then_some(n as u32);
        s.steps = (n % 4 > 0).then_some(3);
        s.sufficient = [None, Some(true), Some(false)][n % 3];
        s.teacher = (n % 2 == 1).then(|| format!("m\"{text}@r"));
        s.cache_entries = (0..n % 3).map(|k| format!("{k}{text}")).collect();
        s.revisions = (0..n % 3)
            .map(|k| format!("enwiki#{k}@{n}{text}"))
            .collect();
        s.params = match n % 4 {
            0 => "{\"k\": 2, \"a\": [1.5, \"x\\\"y\"], \"b\": {\"c\": null}}".into(),
            1 => "not json \u{1}".into(),
            2 => String::new(),
            _ => format!("{{\"n\":{n}}}"),
        };
        assert_eq!(lines.line(&s), serde_line(&s), "{text:?}");
        assert_eq!(jsonl_line(&s), serde_line(&s), "{text:?}");
    }
}

#[test]
fn splits_follow_the_share_and_duplicates_hash_alike() {
    let n = 4000;
    let val = (0..n)
        .filter(|i| split_of(&format!("id{i}"), 0.1) == "validation")
        .count();
    assert!((300..500).contains(&val), "{val}");
    assert!((0..100).all(|i| split_of(&format!("id{i}"), 0.0) == "train"));
    let (a, mut b) = (sample("q"), sample("q"));
    b.id = "other".into();
    assert_eq!(content_hash(&a), content_hash(&b));
    assert_ne!(content_hash(&a), content_hash(&sample("q2")));
}

#[test]
fn dataset_info_is_in_the_sharegpt_form() {
    let v = dataset_info(&[("train", "train.jsonl")]);
    let e = &v["distillery_train"];
    assert_eq!(e["file_name"], "train.jsonl");
    assert_eq!(e["formatting"], "sharegpt");
    assert_eq!(e["columns"]["messages"], "messages");
    assert_eq!(e["tags"]["assistant_tag"], "assistant");
    assert_eq!(e["tags"]["system_tag"], "system");
}
