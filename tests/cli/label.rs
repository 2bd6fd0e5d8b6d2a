//! The label stage end to end: the SFT files of the quick start and of the shared samples,
//! their listing in the manifest, `report labels`, the `label` command, decontamination,
//! duplicate removal, byte-identical reruns, stale files, the Python loadability check
//! (`tests/python/check_sft.py`: Hugging Face `datasets` loads the JSONL, a locally built
//! tokenizer's chat template masks exactly the assistant turn) and, where PyTorch is
//! installed, a LoRA training run on the shared samples' file with TRL
//! (`scripts/check-sft-training.py`).

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{count, manifest, ok, repo, run, shared, sql_json, stage, summary};

/// The files a label stage adds to an output, besides its tables.
const FILES: [&str; 4] = [
    "sft/train.jsonl",
    "sft/validation.jsonl",
    "sft/dataset_info.json",
    "label_report.json",
];

fn run_quickstart(out_dir: &Path, extra: &[&str]) {
    let set = format!("output={}", out_dir.display());
    let mut args = vec!["run", "pipelines/quickstart.toml", "--set", &set];
    args.extend_from_slice(extra);
    ok(&args);
}

/// Runs `pipelines/labels.toml` over the shared samples into a temporary directory (`None`
/// when they are absent); returns the directory and the output in it.
fn run_labels(extra: &[&str]) -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    shared("")?;
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("labels");
    let set = format!("output={}", out_dir.display());
    let mut args = vec!["run", "pipelines/labels.toml", "--set", &set];
    args.extend_from_slice(extra);
    ok(&args);
    Some((tmp, out_dir))
}

fn jsonl(out_dir: &Path) -> Vec<Value> {
    let mut v = Vec::new();
    for rel in ["sft/train.jsonl", "sft/validation.jsonl"] {
        let text = std::fs::read_to_string(out_dir.join(rel)).unwrap();
        for line in text.lines() {
            v.push(serde_json::from_str(line).unwrap_or_else(|e| panic!("{rel}: {e}: {line}")));
        }
    }
    v
}

fn counter(out_dir: &Path, name: &str) -> u64 {
    let s = summary(out_dir);
    stage(&s, "label")["counters"][name].as_u64().unwrap_or(0)
}

/// The label stage's shard tasks (its merge task left out), by the summary's `tasks`.
fn shard_tasks(out_dir: &Path) -> u64 {
    let s = summary(out_dir);
    let tasks = stage(&s, "label")["tasks"].as_array().unwrap().clone();
    tasks
        .iter()
        .filter(|t| t["task"].as_str().unwrap().contains("/shard-"))
        .count() as u64
}

/// Hugging Face `datasets` loads the file and a local tokenizer's chat template masks exactly
/// the assistant turn. In CI (`CI` set) `datasets` and `transformers` must be installed;
/// elsewhere the check is skipped with a message when they are not.
pub(crate) fn sft_check(file: &Path) {
    let has = Command::new("python3")
        .args(["-c", "import datasets, transformers, tokenizers, jinja2"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has {
        assert!(
            std::env::var_os("CI").is_none(),
            "datasets and transformers are required in CI (.ci/run installs them)"
        );
        eprintln!(
            "skipping the SFT loadability check: python3 with datasets and transformers not found"
        );
        return;
    }
    let out = Command::new("python3")
        .arg(repo().join("tests/python/check_sft.py"))
        .arg(file)
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_DATASETS_OFFLINE", "1")
        .output()
        .unwrap();
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "check_sft.py failed on {}",
        file.display()
    );
}

/// Trains a LoRA adapter on the file with TRL (`scripts/check-sft-training.py`: TRL's
/// `SFTTrainer`, `assistant_only_loss`, PEFT LoRA, a small random Llama made locally): the
/// labelled tokens of a collated batch are exactly the targets, and the loss falls. It needs
/// PyTorch, TRL and PEFT in the Python named by `DISTILLERY_TRAIN_PYTHON` (it fails when that
/// Python lacks them), else in `python3`; without them there it is skipped with a message, in
/// CI too (PyPI's PyTorch wheel brings gigabytes of CUDA libraries: CI installs none).
pub(crate) fn sft_training_check(file: &Path) {
    let named = std::env::var("DISTILLERY_TRAIN_PYTHON").ok();
    let python = named.clone().unwrap_or_else(|| "python3".into());
    let has = Command::new(&python)
        .args(["-c", "import torch, trl, peft, datasets, transformers"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        has || named.is_none(),
        "DISTILLERY_TRAIN_PYTHON={python} cannot import torch, trl, peft, datasets and transformers"
    );
    if !has {
        eprintln!(
            "skipping the SFT training check: {python} has no torch, trl and peft \
             (set DISTILLERY_TRAIN_PYTHON to a Python that has them)"
        );
        return;
    }
    let out = Command::new(&python)
        .arg(repo().join("scripts/check-sft-training.py"))
        .arg(file)
        .args(["--steps", "12", "--samples", "64"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "check-sft-training.py failed on {}",
        file.display()
    );
    assert!(
        stdout.contains("trained with TRL SFTTrainer + LoRA"),
        "{stdout}"
    );
}

#[test]
fn quickstart_writes_sft_files_listed_in_the_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("qs");
    run_quickstart(&out_dir, &[]);

    // Every file is listed in the manifest with its size and rows.
    let m = manifest(&out_dir);
    let files = m["files"].as_array().expect("manifest lists files");
    for rel in FILES {
        let entry = files
            .iter()
            .find(|f| f["path"] == rel)
            .unwrap_or_else(|| panic!("{rel} not in the manifest: {m}"));
        let bytes = std::fs::read(out_dir.join(rel)).unwrap();
        assert_eq!(
            entry["bytes"].as_u64().unwrap(),
            bytes.len() as u64,
            "{rel}"
        );
        if rel.ends_with(".jsonl") {
            let lines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
            assert_eq!(entry["rows"].as_u64().unwrap(), lines, "{rel}");
        }
    }
    let train = std::fs::read_to_string(out_dir.join("sft/train.jsonl")).unwrap();
    assert!(train.lines().count() > 0);

    // The JSONL files hold the sft table, split by split.
    let samples = jsonl(&out_dir);
    let table_rows = count(&out_dir, "SELECT count(*) FROM sft");
    assert_eq!(samples.len() as i64, table_rows);
    let train_ids: HashSet<String> = train
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let table_train: HashSet<String> =
        sql_json(&out_dir, "SELECT id FROM sft WHERE split = 'train'")
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect();
    assert_eq!(train_ids, table_train);
    for s in &samples {
        let keys: Vec<&str> = s.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(&keys[..3], ["id", "messages", "weight"], "{s}");
        assert!(s["params"].is_object(), "params is a JSON object: {s}");
        let roles: Vec<&str> = s["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles.last(), Some(&"assistant"), "{s}");
        assert_eq!(s["pipeline_hash"], m["pipeline_hash"]);
    }

    // LLaMA-Factory's dataset_info.json, sharegpt form, file names relative to sft/.
    let info: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("sft/dataset_info.json")).unwrap())
            .unwrap();
    let e = &info["distillery_train"];
    assert_eq!(e["file_name"], "train.jsonl");
    assert_eq!(e["formatting"], "sharegpt");
    assert_eq!(e["columns"]["messages"], "messages");
    for (k, v) in [
        ("role_tag", "role"),
        ("content_tag", "content"),
        ("user_tag", "user"),
        ("assistant_tag", "assistant"),
        ("system_tag", "system"),
    ] {
        assert_eq!(e["tags"][k], v, "{info}");
    }

    // One label record per question and method; summary counters.
    let questions = count(&out_dir, "SELECT count(*) FROM questions");
    assert_eq!(
        count(&out_dir, "SELECT count(*) FROM labels"),
        2 * questions
    );
    let s = summary(&out_dir);
    let c = &stage(&s, "label")["counters"];
    assert_eq!(c["questions"].as_i64(), Some(questions), "{c}");
    for key in [
        "labels.hseq-paper",
        "labels.answer-aware",
        "positives.hseq-paper",
        "sufficient.answer-aware",
        "samples.hseq_iteration",
        "samples.train",
        // Where the stage's time went (microseconds; each phase had work to do).
        "phase_us.read",
        "phase_us.hseq",
        "phase_us.label",
        "phase_us.samples",
        "phase_us.write",
    ] {
        assert!(c[key].as_u64().unwrap_or(0) > 0, "{key} in {c}");
    }
    for key in [
        "questions_missing_context",
        "low_confidence.hseq-paper",
        "low_confidence.answer-aware",
        "samples.validation",
        "duplicates_removed",
        "decontaminated",
    ] {
        assert!(c[key].is_u64(), "{key} in {c}");
    }
    assert_eq!(c["duplicates_removed"], 0);
    assert_eq!(c["decontaminated"], 0);
    assert_eq!(
        c["samples.train"].as_u64().unwrap() + c["samples.validation"].as_u64().unwrap(),
        samples.len() as u64
    );
    let report: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("label_report.json")).unwrap()).unwrap();
    assert!(
        report["hotpotqa"]["answer-aware"]["paragraph"]["f1"].is_number(),
        "{report}"
    );

    // The overview shows the dataset view; the plan lists the files; the report renders.
    let overview = ok(&["inspect", out_dir.to_str().unwrap()]);
    for needle in [
        "sft/train.jsonl",
        "sft samples per task and dataset",
        "hseq_iteration",
        "p99",
        "steps per trajectory",
        "sufficient at step n, per task",
        "labels per dataset and method",
    ] {
        assert!(
            overview.contains(needle),
            "{needle} missing from:\n{overview}"
        );
    }
    let plan = ok(&["plan", "pipelines/quickstart.toml"]);
    for rel in FILES {
        assert!(plan.contains(rel), "{rel} missing from:\n{plan}");
    }
    let table = ok(&["report", "labels", out_dir.to_str().unwrap()]);
    assert!(table.contains("== hotpotqa =="), "{table}");

    sft_check(&out_dir.join("sft/train.jsonl"));
}

#[test]
fn labels_pipeline_labels_the_shared_samples_in_one_run() {
    let Some((_tmp, out_dir)) = run_labels(&[]) else {
        return;
    };
    let s = summary(&out_dir);
    let c = &stage(&s, "label")["counters"];
    eprintln!("label stage counters on the shared samples: {c}");
    let questions = count(&out_dir, "SELECT count(*) FROM questions");
    assert_eq!(c["questions"].as_i64(), Some(questions));
    for m in ["hseq-paper", "answer-aware"] {
        assert_eq!(c[format!("labels.{m}")].as_i64(), Some(questions), "{c}");
    }
    for task in [
        "hseq_iteration",
        "hanrag_refiner",
        "hanrag_ending",
        "hanrag_router",
    ] {
        assert!(
            c[format!("samples.{task}")].as_u64().unwrap_or(0) > 0,
            "{task}: {c}"
        );
    }
    for d in [
        "hotpotqa", "musique", "2wiki", "tatqa", "hybridqa", "metaqa",
    ] {
        assert!(
            count(
                &out_dir,
                &format!("SELECT count(*) FROM labels WHERE dataset = '{d}'")
            ) > 0,
            "{d}"
        );
    }
    // MetaQA questions get positives from their KB neighbourhood.
    assert!(
        count(
            &out_dir,
            "SELECT count(*) FROM labels WHERE dataset = 'metaqa' AND cardinality(positives) > 0"
        ) > 0
    );

    // A question's samples share one split: validation holds no question training saw.
    let questions_in = |file: &str| -> HashSet<String> {
        std::fs::read_to_string(out_dir.join(file))
            .unwrap()
            .lines()
            .map(|l| {
                let s: Value = serde_json::from_str(l).unwrap();
                s["question_id"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let train = questions_in("sft/train.jsonl");
    let validation = questions_in("sft/validation.jsonl");
    assert!(!train.is_empty() && !validation.is_empty());
    assert_eq!(train.intersection(&validation).count(), 0);

    // Every segment id a sample names is a row of the `segments` table, MetaQA's KB edges
    // included (numbered as in their KB part, not among the question's edges).
    let unjoined = sql_json(
        &out_dir,
        "SELECT x.dataset, count(*) AS n FROM (SELECT dataset, unnest(segment_ids) AS sid FROM sft) x \
         LEFT JOIN segments g ON x.sid = g.id WHERE g.id IS NULL GROUP BY x.dataset",
    );
    assert!(unjoined.is_empty(), "{unjoined:?}");

    // A sufficient MuSiQue trajectory (the SFT method, answer-aware) has picked a segment
    // whose text holds the answer: a positive past the candidate cap is picked as its
    // paragraph.
    let picked = sql_json(
        &out_dir,
        "SELECT l.question_id, q.answers, g.content FROM \
         (SELECT question_id, unnest(selected) AS sid FROM labels \
          WHERE method = 'answer-aware' AND sufficient AND dataset = 'musique') l \
         JOIN segments g ON g.id = l.sid JOIN questions q ON q.id = l.question_id",
    );
    let mut shows: std::collections::BTreeMap<String, bool> = Default::default();
    for r in &picked {
        let text = r["content"].as_str().unwrap().to_lowercase();
        let hit = r["answers"].as_array().unwrap().iter().any(|a| {
            let a = a.as_str().unwrap().trim().to_lowercase();
            !a.is_empty() && text.contains(&a)
        });
        *shows
            .entry(r["question_id"].as_str().unwrap().to_string())
            .or_default() |= hit;
    }
    assert!(shows.len() >= 20, "{}", shows.len());
    let blind: Vec<&String> = shows.iter().filter(|(_, s)| !**s).map(|(q, _)| q).collect();
    assert!(
        blind.is_empty(),
        "sufficient without the answer shown: {blind:?}"
    );
    assert!(
        count(
            &out_dir,
            "SELECT count(*) FROM sft WHERE dataset = 'metaqa' AND cardinality(segment_ids) > 0"
        ) > 0
    );

    // A TAT-QA arithmetic answer is in no segment; a sufficient trajectory has picked the
    // numbers its derivation computes it from (before operands were matched: 282 of 509).
    let picked = sql_json(
        &out_dir,
        "SELECT l.question_id, q.meta, g.content FROM \
         (SELECT question_id, unnest(selected) AS sid FROM labels WHERE method = 'answer-aware' \
          AND sufficient AND dataset = 'tatqa' AND question_type = 'arithmetic') l \
         JOIN segments g ON g.id = l.sid JOIN questions q ON q.id = l.question_id",
    );
    let numbers = |s: &str| -> HashSet<String> {
        s.split(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))
            .map(|w| w.trim_matches([',', '.']).replace(',', ""))
            .filter(|w| w.len() > 1 && w.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
            .map(|w| match w.contains('.') {
                true => w.trim_end_matches('0').trim_end_matches('.').to_string(),
                false => w,
            })
            .collect()
    };
    let mut operand_shown: std::collections::BTreeMap<String, bool> = Default::default();
    for r in &picked {
        let meta: Value = serde_json::from_str(r["meta"].as_str().unwrap()).unwrap();
        let ops = numbers(meta["derivation"].as_str().unwrap_or_default());
        // A row's content is a header→cell object: its cells, not the column names
        // (`Fiscal 2019`) every row of its table repeats.
        let content = r["content"].as_str().unwrap();
        let cells = match serde_json::from_str::<serde_json::Map<String, Value>>(content) {
            Ok(row) => row
                .values()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(" "),
            Err(_) => content.to_string(),
        };
        let hit = !ops.is_disjoint(&numbers(&cells));
        *operand_shown
            .entry(r["question_id"].as_str().unwrap().to_string())
            .or_default() |= hit;
    }
    let shown = operand_shown.values().filter(|s| **s).count();
    assert!(operand_shown.len() >= 400, "{}", operand_shown.len());
    assert!(
        shown * 100 >= operand_shown.len() * 95,
        "{shown} of {} sufficient arithmetic trajectories picked an operand",
        operand_shown.len()
    );
    // Picked as operands, and not every segment with a common number: a median of one
    // operand positive a question, at most one per operand (an average of 7 ages: 7).
    let labels = sql_json(
        &out_dir,
        "SELECT positives FROM labels WHERE method = 'answer-aware' AND dataset = 'tatqa' \
         AND question_type = 'arithmetic'",
    );
    let mut per_question: Vec<usize> = labels
        .iter()
        .map(|r| {
            r["positives"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["reason"] == "operand")
                .count()
        })
        .collect();
    per_question.sort_unstable();
    assert!(per_question.len() >= 400, "{}", per_question.len());
    assert!(
        (1..=2).contains(&per_question[per_question.len() / 2]),
        "{per_question:?}"
    );
    assert!(*per_question.last().unwrap() <= 8, "{per_question:?}");

    // dataset -> method -> level -> precision/recall/f1, the same as the stage's report.
    let text = ok(&[
        "report",
        "labels",
        out_dir.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let r: Value = serde_json::from_str(&text).unwrap();
    for (d, levels) in [
        ("hotpotqa", &["sentence", "paragraph"][..]),
        ("musique", &["paragraph"][..]),
        ("2wiki", &["sentence", "paragraph"][..]),
        ("tatqa", &["paragraph"][..]),
    ] {
        for m in ["hseq-paper", "answer-aware"] {
            for l in levels {
                for k in ["precision", "recall", "f1"] {
                    let v = r[d][m][l][k]
                        .as_f64()
                        .unwrap_or_else(|| panic!("{d}.{m}.{l}.{k} missing: {text}"));
                    assert!((0.0..=100.0).contains(&v), "{d}.{m}.{l}.{k} = {v}");
                }
            }
        }
    }
    let written: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("label_report.json")).unwrap()).unwrap();
    assert_eq!(
        r, written,
        "report labels differs from the stage's label_report.json"
    );
    eprintln!("{}", ok(&["report", "labels", out_dir.to_str().unwrap()]));
    sft_check(&out_dir.join("sft/train.jsonl"));
    sft_training_check(&out_dir.join("sft/train.jsonl"));
}

#[test]
fn label_command_runs_the_reader_hseq_and_the_label_stage() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("hp");
    ok(&[
        "label",
        "hotpotqa",
        "data/quickstart/hotpot.json",
        "--out",
        out_dir.to_str().unwrap(),
        "--method",
        "answer-aware,hseq-paper",
        "--preset",
        "medium",
        "--shards",
        "2",
    ]);
    let m = manifest(&out_dir);
    assert_eq!(m["shards"], 2);
    assert!(count(&out_dir, "SELECT count(*) FROM segments") > 0);
    assert_eq!(
        count(&out_dir, "SELECT count(DISTINCT method) FROM labels"),
        2
    );
    // The first method's trajectories become the samples.
    let methods = sql_json(&out_dir, "SELECT DISTINCT method FROM sft");
    assert_eq!(methods.len(), 1);
    assert_eq!(methods[0]["method"], "answer-aware");
    let samples = jsonl(&out_dir);
    assert!(!samples.is_empty());
    assert!(
        samples[0]["params"].to_string().contains("medium"),
        "{}",
        samples[0]
    );

    // A MetaQA file with the quick start's KB: questions get k-hop subgraph positives.
    let hop = tmp.path().join("1-hop");
    std::fs::create_dir_all(&hop).unwrap();
    let qa = hop.join("qa_test.txt");
    std::fs::write(
        &qa,
        "who directed [The Lantern Keeper]\tInes Calloway\n\
         which movies did [Oskar Vey] direct\tHarbor of Glass\n\
         what language is [The Lantern Keeper] in\tEnglish\n",
    )
    .unwrap();
    let kb_out = tmp.path().join("metaqa");
    ok(&[
        "label",
        "metaqa",
        qa.to_str().unwrap(),
        "--out",
        kb_out.to_str().unwrap(),
        "--kb-input",
        "data/quickstart/kb.txt",
    ]);
    assert_eq!(count(&kb_out, "SELECT count(*) FROM questions"), 3);
    assert!(count(&kb_out, "SELECT count(*) FROM triples") > 0);
    assert!(
        count(
            &kb_out,
            "SELECT count(*) FROM labels WHERE cardinality(positives) > 0"
        ) >= 2
    );
    assert!(count(&kb_out, "SELECT count(*) FROM sft") > 0);

    // Not a QA format: refused with the list of those that are.
    let out = run(&["label", "metaqa-kb", "x.txt", "--out", "unused"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a QA dataset format"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The quick start's HotpotQA records with the given ids.
fn quickstart_questions(ids: &[&str]) -> Vec<Value> {
    let all: Vec<Value> =
        serde_json::from_slice(&std::fs::read(repo().join("data/quickstart/hotpot.json")).unwrap())
            .unwrap();
    all.into_iter()
        .filter(|r| ids.contains(&r["_id"].as_str().unwrap()))
        .collect()
}

/// The quick start's questions with the given ids, in HotpotQA's format, each renamed and
/// with its question text shouted (normalisation must still find it).
fn eval_file(dir: &Path, ids: &[&str]) -> std::path::PathBuf {
    let picked: Vec<Value> = quickstart_questions(ids)
        .into_iter()
        .map(|mut r| {
            r["_id"] = Value::from(format!("eval-{}", r["_id"].as_str().unwrap()));
            let q = r["question"].as_str().unwrap().to_uppercase();
            r["question"] = Value::from(q.trim_end_matches('?').to_string());
            r
        })
        .collect();
    assert_eq!(picked.len(), ids.len());
    let path = dir.join("eval.json");
    std::fs::write(&path, serde_json::to_vec(&picked).unwrap()).unwrap();
    path
}

/// The record ids of the quick start questions the evaluation files hold.
fn eval_question_ids(out_dir: &Path) -> HashSet<String> {
    let ids: HashSet<String> = sql_json(
        out_dir,
        "SELECT id FROM questions WHERE question_id IN ('qs-0001', 'qs-0004')",
    )
    .iter()
    .map(|r| r["id"].as_str().unwrap().to_string())
    .collect();
    assert_eq!(ids.len(), 2);
    ids
}

#[test]
fn decontamination_removes_samples_of_evaluation_questions() {
    let tmp = tempfile::tempdir().unwrap();
    let eval = eval_file(tmp.path(), &["qs-0001", "qs-0004"]);
    let base = tmp.path().join("base");
    run_quickstart(&base, &[]);
    let clean = tmp.path().join("clean");
    let set = format!(
        "stages.label.options.decontaminate=[\"{}\"]",
        eval.display()
    );
    run_quickstart(&clean, &["--set", &set]);

    let removed = counter(&clean, "decontaminated");
    assert!(removed > 0, "nothing decontaminated");
    assert_eq!(counter(&clean, "decontaminate.questions"), 2);
    assert_eq!(counter(&base, "decontaminated"), 0);
    let (before, after) = (jsonl(&base), jsonl(&clean));
    assert_eq!(before.len() as u64 - after.len() as u64, removed);
    assert_eq!(
        count(&clean, "SELECT count(*) FROM sft"),
        after.len() as i64
    );

    // No remaining sample belongs to or shows an evaluation question.
    let ids = eval_question_ids(&base);
    let of_eval = |v: &[Value]| {
        v.iter()
            .filter(|s| ids.contains(s["question_id"].as_str().unwrap()))
            .count()
    };
    assert!(of_eval(&before) > 0);
    assert_eq!(of_eval(&after), 0);
    let texts = [
        "What nationality is the director of the film in which Mara Lindqvist plays a lighthouse keeper",
        "Who was born earlier, Ines Calloway or Oskar Vey",
    ];
    for s in &after {
        for m in s["messages"].as_array().unwrap() {
            for t in texts {
                assert!(!m["content"].as_str().unwrap().contains(t), "{t} in {s}");
            }
        }
    }

    // The `label` command's flag does the same.
    let cmd = tmp.path().join("cmd");
    ok(&[
        "label",
        "hotpotqa",
        "data/quickstart/hotpot.json",
        "--out",
        cmd.to_str().unwrap(),
        "--decontaminate",
        eval.to_str().unwrap(),
        "--decontaminate-format",
        "hotpotqa",
    ]);
    assert!(counter(&cmd, "decontaminated") > 0);

    // A missing evaluation file is reported before anything runs.
    let out = run(&[
        "validate",
        "pipelines/quickstart.toml",
        "--set",
        "stages.label.options.decontaminate=[\"no/such/eval.json\"]",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no/such/eval.json: no such file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The quick start's questions with the given ids as MuSiQue lines (its real JSON-lines
/// form), lowercased: an evaluation set in another format than the training data.
fn musique_eval_lines(ids: &[&str]) -> Vec<String> {
    let lines: Vec<String> = quickstart_questions(ids)
        .iter()
        .map(|r| {
            serde_json::json!({
                "id": format!("2hop__{}", r["_id"].as_str().unwrap()),
                "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "P.", "is_supporting": true}],
                "question": r["question"].as_str().unwrap().to_lowercase(),
                "question_decomposition": [
                    {"id": 1, "question": "a", "answer": "b", "paragraph_support_idx": 0}
                ],
                "answer": r["answer"],
                "answer_aliases": [],
                "answerable": true
            })
            .to_string()
        })
        .collect();
    assert_eq!(lines.len(), ids.len());
    lines
}

#[test]
fn evaluation_files_are_read_whole_in_the_format_they_are_in() {
    let tmp = tempfile::tempdir().unwrap();
    let label = |eval: &Path, format: Option<&str>, out: &str| {
        let out = tmp.path().join(out);
        let mut args = vec![
            "label".to_string(),
            "hotpotqa".into(),
            "data/quickstart/hotpot.json".into(),
            "--out".into(),
            out.display().to_string(),
            "--decontaminate".into(),
            eval.display().to_string(),
        ];
        if let Some(f) = format {
            args.extend(["--decontaminate-format".to_string(), f.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        (run(&args), out)
    };
    let failed = |o: &std::process::Output, out: &Path, wants: &[&str]| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{err}");
        for w in wants {
            assert!(err.contains(w), "{w:?} not in: {err}");
        }
        assert!(!out.join("_manifest.json").exists(), "published: {err}");
    };

    // MuSiQue lines, no format named: told from the file, and their questions removed.
    let lines = musique_eval_lines(&["qs-0001", "qs-0004"]);
    let eval = tmp.path().join("eval.jsonl");
    std::fs::write(&eval, lines.join("\n") + "\n").unwrap();
    let (o, out) = label(&eval, None, "musique");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(counter(&out, "decontaminate.questions"), 2);
    let removed = counter(&out, "decontaminated");
    assert!(removed > 0, "nothing decontaminated");
    let eval_ids = eval_question_ids(&out);
    assert!(
        jsonl(&out)
            .iter()
            .all(|s| !eval_ids.contains(s["question_id"].as_str().unwrap()))
    );

    // Each of these fails the run before anything is published, saying why: the eval file
    // named as the wrong format, a cut line (the file, the line, the reason), text in no QA
    // format, a named format that yields no question.
    let cut = format!("{}\n{}\n", lines[0], &lines[1][..40]);
    let cases: [(&str, &str, Option<&str>, &[&str]); 4] = [
        (
            "wrong.jsonl",
            &lines.join("\n"),
            Some("hotpotqa"),
            &["wrong.jsonl"],
        ),
        (
            "cut.jsonl",
            &cut,
            None,
            &[
                "cut.jsonl (read as musique): 1 bad record(s)",
                "cut.jsonl line 2",
            ],
        ),
        (
            "questions.txt",
            "who wrote it?\nwhere is it?\n",
            None,
            &[
                "questions.txt: its first record (read within the first 4 MiB) is of no QA format",
                "decontaminate_formats",
            ],
        ),
        (
            "empty.json",
            "[]",
            Some("hotpotqa"),
            &["empty.json (read as hotpotqa): no question in it"],
        ),
    ];
    for (name, text, format, wants) in cases {
        let file = tmp.path().join(name);
        std::fs::write(&file, text).unwrap();
        let (o, out) = label(&file, format, &format!("out-{name}"));
        failed(&o, &out, wants);
    }
}

#[test]
fn exact_duplicate_samples_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    // The quick start's questions plus a second copy of the first one under another id: the
    // copy's samples are the same messages.
    let mut all: Vec<Value> =
        serde_json::from_slice(&std::fs::read(repo().join("data/quickstart/hotpot.json")).unwrap())
            .unwrap();
    let mut copy = all[0].clone();
    copy["_id"] = Value::from("qs-0001-copy");
    all.push(copy);
    let dir = tmp.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    let dup = dir.join("hotpot.json");
    std::fs::write(&dup, serde_json::to_vec(&all).unwrap()).unwrap();

    let label = |input: &Path, out: &Path| {
        ok(&[
            "label",
            "hotpotqa",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
    };
    let base = tmp.path().join("base");
    label(&repo().join("data/quickstart/hotpot.json"), &base);
    let out_dir = tmp.path().join("dup");
    label(&dup, &out_dir);

    let removed = counter(&out_dir, "duplicates_removed");
    let first = sql_json(
        &base,
        "SELECT count(*) AS n FROM sft s JOIN questions q ON s.question_id = q.id \
         WHERE q.question_id = 'qs-0001'",
    )[0]["n"]
        .as_u64()
        .unwrap();
    assert!(first > 0);
    assert_eq!(
        removed, first,
        "one duplicate per sample of the copied question"
    );
    assert_eq!(counter(&base, "duplicates_removed"), 0);
    let samples = jsonl(&out_dir);
    assert_eq!(samples.len(), jsonl(&base).len());
    let distinct: HashSet<String> = samples.iter().map(|s| s["messages"].to_string()).collect();
    assert_eq!(distinct.len(), samples.len());
    assert_eq!(
        count(&out_dir, "SELECT count(*) FROM labels"),
        7,
        "every question is still labelled (by the default method)"
    );
}

#[test]
fn reruns_write_byte_identical_sft_files_and_stale_ones_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    run_quickstart(&a, &["--set", "run.shards=3"]);
    run_quickstart(&b, &["--set", "run.shards=3"]);
    let read = |d: &Path| -> Vec<Vec<u8>> {
        FILES
            .iter()
            .map(|rel| std::fs::read(d.join(rel)).unwrap())
            .collect()
    };
    let first = read(&a);
    assert!(!first[0].is_empty());
    assert!(first == read(&b), "two runs wrote different SFT files");
    // Into the same place again.
    run_quickstart(&a, &["--set", "run.shards=3"]);
    assert!(first == read(&a), "a rerun wrote different SFT files");
    // Parallelism does not change the order of anything.
    run_quickstart(&b, &["--set", "run.shards=3", "--set", "run.parallelism=1"]);
    assert!(first == read(&b), "parallelism changed the SFT files");

    // A later run without a label stage removes the files the previous manifest listed, and
    // only those.
    std::fs::write(a.join("notes.txt"), "mine").unwrap();
    std::fs::write(a.join("sft/notes.txt"), "mine too").unwrap();
    ok(&[
        "ingest",
        "hotpotqa",
        "data/quickstart/hotpot.json",
        "--out",
        a.to_str().unwrap(),
    ]);
    for rel in FILES {
        assert!(!a.join(rel).exists(), "{rel} left behind");
    }
    assert!(a.join("notes.txt").exists() && a.join("sft/notes.txt").exists());
    let left: Vec<String> = std::fs::read_dir(a.join("sft"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["notes.txt"]);
    assert_eq!(manifest(&a)["files"], Value::Array(vec![]));
}

/// Every file under `dir` (relative path → bytes), except the run's manifest and summary and
/// the index root with its record (versions are named by build time; tests/cli/index.rs
/// compares indexes by their answers).
fn output_files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    distillery_testkit::files::files_under(dir)
        .into_iter()
        .filter(|(rel, _)| !["_manifest.json", "_summary.json"].contains(&rel.as_str()))
        .filter(|(rel, _)| !rel.starts_with("index/") && !rel.starts_with("indexes/"))
        .map(|(rel, p)| (rel, std::fs::read(p).unwrap()))
        .collect()
}

/// Runs `pipeline` into `a` as it is and into `b` with a context budget of `budget` bytes, and
/// checks the label stage of `b` labelled in groups (one a question for a budget of one
/// byte) and wrote the same files byte for byte.
fn routed_run_matches(pipeline: &Path, a: &Path, b: &Path, budget: u64) {
    let run_into = |out: &Path, extra: &[&str]| {
        let set = format!("output={}", out.display());
        let mut args = vec!["run", pipeline.to_str().unwrap(), "--set", &set];
        args.extend_from_slice(extra);
        ok(&args);
    };
    run_into(a, &[]);
    let budget = format!("stages.label.options.context_memory_bytes={budget}");
    run_into(b, &["--set", &budget]);
    let questions = counter(b, "questions");
    assert!(questions > 1);
    // One group of questions per shard task (the one QA input of each pipeline) when the
    // contexts fit.
    assert_eq!(counter(a, "context_groups"), shard_tasks(a));
    assert_eq!(counter(a, "context_rows_spilled"), 0);
    let groups = counter(b, "context_groups");
    eprintln!("{questions} questions in {groups} groups under {budget}");
    assert!(groups > shard_tasks(b) && groups <= questions);
    if budget.ends_with("=1") {
        assert_eq!(groups, questions);
    }
    assert!(counter(b, "context_rows_spilled") > 0);
    let (fa, fb) = (output_files(a), output_files(b));
    assert!(
        fa.keys().any(|k| k.starts_with("sft/part-")),
        "{:?}",
        fa.keys()
    );
    assert_eq!(
        fa.keys().collect::<Vec<_>>(),
        fb.keys().collect::<Vec<_>>(),
        "routed contexts changed the files written"
    );
    for (rel, bytes) in &fa {
        assert!(fb[rel] == *bytes, "{rel} differs when contexts are routed");
    }
}

#[test]
fn contexts_over_the_budget_are_labelled_in_groups_with_the_same_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    routed_run_matches(
        &repo().join("pipelines/quickstart.toml"),
        &tmp.path().join("a"),
        &tmp.path().join("b"),
        1,
    );
    // Tables: TAT-QA's shared sample (questions citing a table and its paragraphs), its
    // contexts in about ten groups; given twice (a copy as a second file), so a group spans
    // the switch from one file's parts to the next and every context id is staged twice (the
    // later record replaces the earlier, routed or not).
    let Some(tatqa) = shared("tatqa/tatqa_dataset_dev.first200.json") else {
        return;
    };
    let copy = tmp.path().join("tatqa-copy.json");
    std::fs::copy(&tatqa, &copy).unwrap();
    let pipeline = tmp.path().join("tatqa.toml");
    std::fs::write(
        &pipeline,
        format!(
            "version = 1\nname = \"tatqa\"\noutput = \"unused\"\n[run]\nshards = 2\n\
             [[inputs]]\nname = \"tatqa\"\nformat = \"tatqa\"\npaths = [{:?}, {:?}]\n\
             [[stages]]\nkind = \"label\"\n",
            tatqa.display().to_string(),
            copy.display().to_string()
        ),
    )
    .unwrap();
    routed_run_matches(
        &pipeline,
        &tmp.path().join("ta"),
        &tmp.path().join("tb"),
        200_000,
    );
    assert!(count(&tmp.path().join("tb"), "SELECT count(*) FROM labels") > 0);
}

/// HSEQ-H head samples on every shared dataset: one per question whose SFT-method trajectory
/// ends sufficient and that has an answer; the target is that answer with the ids of the
/// evidence items, each shown in the prompt's evidence lines.
#[test]
fn head_samples_answer_from_the_canonical_evidence() {
    let Some((_tmp, out_dir)) = run_labels(&[
        "--set",
        "stages.label.options.head=true",
        "--set",
        "stages.label.options.head_supporting_ids=true",
    ]) else {
        return;
    };
    let rows = crate::sql_json(&out_dir, "SELECT id, question, answers FROM questions");
    let text: std::collections::HashMap<&str, &str> = rows
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["question"].as_str().unwrap()))
        .collect();
    let answers: std::collections::HashMap<String, Vec<String>> = rows
        .iter()
        .map(|r| {
            let a = r["answers"].as_array().unwrap();
            (
                r["id"].as_str().unwrap().to_string(),
                a.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
            )
        })
        .collect();
    let want: HashSet<String> = crate::sql_json(
        &out_dir,
        "SELECT question_id FROM labels WHERE method = 'answer-aware' AND sufficient",
    )
    .into_iter()
    .map(|r| r["question_id"].as_str().unwrap().to_string())
    .filter(|q| answers[q].iter().any(|a| !a.trim().is_empty()))
    .collect();
    let heads: Vec<Value> = jsonl(&out_dir)
        .into_iter()
        .filter(|s| s["task"] == "hseq_head")
        .collect();
    let got: HashSet<String> = heads
        .iter()
        .map(|s| s["question_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got.len(), heads.len(), "one head sample a question");
    // The merge drops a sample equal to another's: a question asked twice over the same
    // evidence (TAT-QA repeats some) keeps one.
    assert!(got.is_subset(&want));
    for q in want.difference(&got) {
        let first = format!("Question: {}\n", text[q.as_str()]);
        assert!(
            heads.iter().any(|h| h["messages"][1]["content"]
                .as_str()
                .unwrap()
                .starts_with(&first)),
            "{q} has no head sample"
        );
    }
    let removed = counter(&out_dir, "duplicates_removed") as usize;
    assert!(
        want.len() - got.len() <= removed,
        "{} of {}",
        got.len(),
        want.len()
    );
    let mut datasets = HashSet::new();
    for s in &heads {
        let m = s["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        let user = m[1]["content"].as_str().unwrap();
        assert!(user.contains("\n\nEvidence:\n- ["), "{user}");
        let target: Value = serde_json::from_str(m[2]["content"].as_str().unwrap()).unwrap();
        let q = s["question_id"].as_str().unwrap();
        let first = answers[q].iter().find(|a| !a.trim().is_empty()).unwrap();
        assert_eq!(target["answer"], first.trim());
        let ids = target["supporting_ids"].as_array().unwrap();
        assert!(!ids.is_empty());
        for id in ids {
            assert!(
                user.contains(&format!("- [{}] (", id.as_str().unwrap())),
                "{id}"
            );
        }
        assert_eq!(s["sufficient"], true);
        assert_eq!(s["method"], "answer-aware");
        datasets.insert(s["dataset"].as_str().unwrap().to_string());
    }
    for d in [
        "hotpotqa", "musique", "2wiki", "tatqa", "hybridqa", "metaqa",
    ] {
        assert!(datasets.contains(d), "no head sample of {d}: {datasets:?}");
    }
    sft_check(&out_dir.join("sft/train.jsonl"));
    sft_training_check(&out_dir.join("sft/train.jsonl"));
}

/// HANRAG's router learns its "straightforward" class from CommonsenseQA and "single-step"
/// from Natural Questions (open), each read in its released layout (lines written here): one
/// router sample per question, labelled by its dataset, beside MuSiQue's complex questions.
#[test]
fn router_classes_from_commonsenseqa_and_nq_open() {
    let tmp = tempfile::tempdir().unwrap();
    let csqa = tmp.path().join("train_rand_split.jsonl");
    std::fs::write(
        &csqa,
        concat!(
            r#"{"answerKey": "B", "id": "c1", "question": {"question_concept": "bird", "choices": [{"label": "A", "text": "sea"}, {"label": "B", "text": "nest"}], "stem": "Where does a bird lay its eggs?"}}"#,
            "\n",
            r#"{"answerKey": "A", "id": "c2", "question": {"question_concept": "ice", "choices": [{"label": "A", "text": "melt"}, {"label": "B", "text": "sing"}], "stem": "What does ice do in the sun?"}}"#,
            "\n",
        ),
    )
    .unwrap();
    let nq = tmp.path().join("NQ-open.dev.jsonl");
    std::fs::write(
        &nq,
        concat!(
            r#"{"question": "where is the world's largest ice sheet located today", "answer": ["Antarctica"]}"#,
            "\n",
        ),
    )
    .unwrap();
    let out_dir = tmp.path().join("out");
    let file = tmp.path().join("router.toml");
    std::fs::write(
        &file,
        format!(
            r#"version = 1
name = "router"
output = "{out}"
[[inputs]]
name = "csqa"
format = "commonsenseqa"
paths = ["{csqa}"]
[[inputs]]
name = "nq"
format = "nq-open"
paths = ["{nq}"]
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{hotpot}"]
[[stages]]
kind = "hseq"
[[stages]]
kind = "label"
"#,
            out = out_dir.display(),
            csqa = csqa.display(),
            nq = nq.display(),
            hotpot = repo().join("data/quickstart/hotpot.json").display(),
        ),
    )
    .unwrap();
    ok(&["run", file.to_str().unwrap()]);
    let router: Vec<(String, String)> = jsonl(&out_dir)
        .into_iter()
        .filter(|s| s["task"] == "hanrag_router" && s["method"] == "dataset")
        .map(|s| {
            (
                s["dataset"].as_str().unwrap().to_string(),
                s["messages"].as_array().unwrap().last().unwrap()["content"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let mut router = router;
    router.sort();
    assert_eq!(
        router,
        [
            (
                "commonsenseqa".to_string(),
                "straightforward question".to_string()
            ),
            (
                "commonsenseqa".to_string(),
                "straightforward question".to_string()
            ),
            ("nq".to_string(), "single-step question".to_string()),
        ]
    );
    // Their questions are labelled too (no context: no positives, no trajectory), by the
    // default method.
    assert_eq!(
        count(
            &out_dir,
            "SELECT count(*) FROM labels WHERE dataset IN ('commonsenseqa', 'nq') \
             AND cardinality(positives) = 0 AND steps = 0"
        ),
        3
    );
}
