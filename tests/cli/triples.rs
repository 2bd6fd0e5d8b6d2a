//! The `triples` stage end to end: against a deterministic stand-in teacher on loopback
//! (extraction, provenance, quarantine, exports, the zero-call rerun, budgets and resume,
//! refusals kept in the cache, passages split to fit a small context),
//! through a fault-injecting server, and against a real vLLM when `DISTILLERY_VLLM_URL` is
//! set (`.ci/run` starts one; see `scripts/vllm-cpu/`).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use distillery_testkit::fault_server::{Fault, FaultServer};
use distillery_testkit::stand_in::teacher;
use serde_json::Value;

use crate::{bin, parquet_files, repo, sql_json, stage, summary};

fn pipeline(dir: &Path, url: &str, cache: &Path) -> std::path::PathBuf {
    let file = dir.join("triples.toml");
    let text = format!(
        r#"version = 1
name = "triples-test"
output = "{out}"
[run]
shards = 2
[[inputs]]
name = "hotpot"
format = "hotpotqa"
paths = ["{data}"]
[[stages]]
kind = "triples"
options = {{ exports = ["hipporag", "ras"] }}
[[stages]]
kind = "hseq"
[llm]
base_url = "{url}"
model = "stand-in"
cache = "{cache}"
max_concurrency = 4
timeout_secs = 1
[llm.price]
input_per_million = 2.0
output_per_million = 6.0
"#,
        out = dir.join("out").display(),
        data = repo().join("data/quickstart/hotpot.json").display(),
        cache = cache.display(),
    );
    std::fs::write(&file, text).unwrap();
    file
}

pub(crate) fn run_file(file: &Path, set: &[String]) -> Output {
    let mut c = bin();
    c.arg("run").arg(file);
    for s in set {
        c.arg("--set").arg(s);
    }
    let out = c.output().unwrap();
    eprintln!(
        "$ distillery run {} {set:?}\n{}{}",
        file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn counter(s: &Value, name: &str) -> u64 {
    stage(s, "triples")["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// The files a triples run makes: Parquet parts of the triples and quarantine tables and
/// the exports.
fn made(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = parquet_files(out)
        .into_iter()
        .filter(|(p, _)| p.starts_with("triples/") || p.starts_with("quarantine/"))
        .collect();
    for f in ["openie/openie_results.json", "openie/ras.jsonl"] {
        v.push((f.to_string(), std::fs::read(out.join(f)).unwrap()));
    }
    v
}

/// The normalised entity key (lowercase, non-alphanumerics as spaces, spaces collapsed).
/// What `plan --estimate` prints for `file` with `sample` passages and the overrides `set`.
fn estimate(file: &Path, sample: usize, set: &[String]) -> String {
    let mut c = bin();
    c.args(["plan", file.to_str().unwrap(), "--estimate", "--sample"])
        .arg(sample.to_string());
    for x in set {
        c.arg("--set").arg(x);
    }
    let est = String::from_utf8_lossy(&c.output().unwrap().stdout).to_string();
    eprintln!("{est}");
    est
}

fn key(s: &str) -> String {
    let m: String = s
        .to_lowercase()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    m.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn char_slice(s: &str, a: usize, b: usize) -> String {
    s.chars().skip(a).take(b - a).collect()
}

#[test]
fn triples_are_extracted_with_provenance_cached_and_budgeted() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![], teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let file = pipeline(tmp.path(), &server.url, &cache);
    let out_dir = tmp.path().join("out");

    assert!(run_file(&file, &[]).status.success());
    let s = summary(&out_dir);
    let passages = counter(&s, "passages");
    let calls = counter(&s, "llm.calls");
    assert!(passages >= 10, "{passages} passages");
    assert_eq!(counter(&s, "passages.invalid"), 1);
    assert_eq!(counter(&s, "llm.quarantined"), 1);
    // Two calls a passage, one for the refused passage (no OpenIE after a bad NER answer).
    assert_eq!(calls, 2 * passages - 1);
    assert_eq!(server.requests() as u64, calls);
    assert_eq!(counter(&s, "llm.cache_hits"), 0);
    assert_eq!(counter(&s, "llm.tokens_in"), 7 * calls);
    assert_eq!(counter(&s, "llm.tokens_out"), 3 * calls);
    // 2.0 per million in, 6.0 out: 32 millionths a call.
    assert_eq!(counter(&s, "llm.cost_micro"), 32 * calls);
    let n_triples = counter(&s, "triples");
    assert!(n_triples > 0);
    // Requests: temperature 0, structured output, the one-shot chat.
    let first = server.bodies.lock().unwrap()[0].clone();
    assert_eq!(first["temperature"], 0.0);
    assert_eq!(first["response_format"]["type"], "json_schema");
    assert_eq!(first["messages"].as_array().unwrap().len(), 4);

    // Rows with provenance: the supporting sentence is in the document and names the subject
    // or the object.
    let rows = sql_json(
        &out_dir,
        "SELECT t.subject, t.subject_name, t.object, t.object_name, t.sentence, t.start, t.\"end\", d.text \
         FROM triples t JOIN documents d ON t.document_id = d.id WHERE t.dataset = 'openie'",
    );
    assert_eq!(rows.len() as u64, n_triples);
    for r in &rows {
        let (a, b) = (
            r["start"].as_u64().unwrap() as usize,
            r["end"].as_u64().unwrap() as usize,
        );
        assert!(r["sentence"].as_u64().is_some(), "{r}");
        let sent = char_slice(r["text"].as_str().unwrap(), a, b);
        let (sn, on) = (
            r["subject_name"].as_str().unwrap(),
            r["object_name"].as_str().unwrap(),
        );
        assert!(sent.contains(sn) || sent.contains(on), "{sent:?} for {r}");
        assert_eq!(r["subject"], key(sn), "{r}");
    }
    // The stage's parts carry a derived tag: they never replace the input's own parts.
    let names: Vec<String> = made(&out_dir).into_iter().map(|(p, _)| p).collect();
    assert!(
        names
            .iter()
            .any(|p| p.starts_with("triples/part-") && p.ends_with("-hotpot@triples-0000.parquet")),
        "{names:?}"
    );
    assert!(
        names
            .iter()
            .any(|p| p.starts_with("quarantine/part-")
                && p.ends_with("-hotpot@triples-0000.parquet")),
        "{names:?}"
    );
    let q = sql_json(
        &out_dir,
        "SELECT reason, detail, excerpt FROM quarantine WHERE dataset = 'openie'",
    );
    assert_eq!(q.len(), 1);
    assert_eq!(q[0]["reason"], "llm_invalid_answer");
    assert!(
        q[0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("hipporag-ner: ")
    );
    assert_eq!(q[0]["excerpt"], "I would rather not say.");
    // The hseq stage after it encoded the extracted triples as KG segments.
    let kg = crate::count(
        &out_dir,
        "SELECT count(*) AS n FROM segments WHERE level = 'triplet'",
    );
    assert_eq!(kg as u64, n_triples);

    // Exports.
    let export: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("openie/openie_results.json")).unwrap())
            .unwrap();
    let docs = export["docs"].as_array().unwrap();
    assert_eq!(docs.len() as u64, passages - 1);
    assert!(docs[0]["idx"].as_str().unwrap().starts_with("chunk-"));
    assert!(export["avg_ent_chars"].as_f64().unwrap() > 1.0);
    let ras = std::fs::read_to_string(out_dir.join("openie/ras.jsonl")).unwrap();
    assert_eq!(ras.lines().count() as u64, passages - 1);
    assert!(ras.contains("(S> ") && ras.contains("| P> appears with| O> "));

    // The estimate reads the same passages (the file is small: exact), renders their prompts
    // and finds every one of them cached. The stand-in server has no /tokenize: characters.
    let est = bin()
        .args(["plan", file.to_str().unwrap(), "--estimate"])
        .output()
        .unwrap();
    assert!(est.status.success());
    let est = String::from_utf8_lossy(&est.stdout);
    eprintln!("{est}");
    assert!(
        est.contains(&format!("passages {passages}   calls {}", 2 * passages)),
        "{est}"
    );
    assert!(est.contains("exact passage count"), "{est}");
    assert!(
        est.contains("100% of the sampled passages are already cached"),
        "{est}"
    );
    assert!(est.contains("4 characters a token"), "{est}");

    // A rerun makes no call and writes the same bytes.
    let before = made(&out_dir);
    let requests = server.requests();
    assert!(run_file(&file, &[]).status.success());
    let s2 = summary(&out_dir);
    assert_eq!(counter(&s2, "llm.calls"), 0);
    assert_eq!(counter(&s2, "llm.cache_hits"), calls);
    assert_eq!(server.requests(), requests);
    assert_eq!(made(&out_dir), before);

    // Packed (`distillery cache pack`), the cache answers the same: no call, same bytes.
    let o = bin()
        .args(["cache", "pack", cache.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["packed"], report["loose"], "{report}");
    assert_eq!(report["removed"], report["loose"], "{report}");
    assert!(report["packed"].as_u64().unwrap() >= calls, "{report}");
    assert!(cache.join("packs").read_dir().unwrap().count() >= 1);
    assert!(run_file(&file, &[]).status.success());
    let s3 = summary(&out_dir);
    assert_eq!(counter(&s3, "llm.calls"), 0);
    assert_eq!(counter(&s3, "llm.cache_hits"), calls);
    assert_eq!(server.requests(), requests);
    assert_eq!(made(&out_dir), before);

    // A budget stops the run cleanly (exit 3, nothing published); without it the next run
    // resumes from what the stopped run cached.
    let cache2 = tmp.path().join("cache2");
    let out2 = tmp.path().join("out2");
    let set = vec![
        format!("llm.cache={}", cache2.display()),
        format!("output={}", out2.display()),
    ];
    let mut limited = set.clone();
    limited.push("llm.budget.max_tokens=60".into());
    let o = run_file(&file, &limited);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("token budget reached") && err.contains("rerun resumes"),
        "{err}"
    );
    assert!(!out2.join("_manifest.json").exists());
    // What the stopped run cached (one object per answer): how many calls finished before the
    // budget tripped depends on which of the concurrent calls came back first.
    let cached = crate::walk(&cache2)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .count() as u64;
    assert!(cached >= 1, "the stopped run cached nothing");
    assert!(run_file(&file, &set).status.success());
    let s3 = summary(&out2);
    let hits = counter(&s3, "llm.cache_hits");
    assert_eq!(hits, cached, "the stopped run's answers are reused");
    assert_eq!(counter(&s3, "llm.calls") + hits, calls);
    assert_eq!(made(&out2), before);
}

#[test]
fn triples_survive_a_misbehaving_server() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let script = vec![
        Fault::Status(500),
        Fault::TooMany("0"),
        Fault::Truncated,
        Fault::NotJson,
        Fault::Drop,
        Fault::Stall(Duration::from_millis(1500)),
        Fault::Status(503),
    ];
    let faulty = rt.block_on(FaultServer::start_with(script.clone(), teacher()));
    let clean = rt.block_on(FaultServer::start_with(vec![], teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &clean.url, &tmp.path().join("cache"));
    assert!(run_file(&file, &[]).status.success());
    let reference = made(&tmp.path().join("out"));

    let out2 = tmp.path().join("out2");
    let set = vec![
        format!("llm.base_url={}", faulty.url),
        format!("llm.cache={}", tmp.path().join("cache2").display()),
        format!("output={}", out2.display()),
    ];
    assert!(run_file(&file, &set).status.success());
    let s = summary(&out2);
    assert_eq!(
        faulty
            .faults_served
            .load(std::sync::atomic::Ordering::SeqCst),
        script.len()
    );
    assert!(counter(&s, "llm.retries") >= script.len() as u64);
    assert_eq!(made(&out2), reference);
    // Nothing bad was cached: a rerun through the faulty server (script spent) calls nothing.
    assert!(run_file(&file, &set).status.success());
    assert_eq!(counter(&summary(&out2), "llm.calls"), 0);
    assert_eq!(made(&out2), reference);
}

pub(crate) fn vllm() -> Option<(String, String)> {
    match std::env::var("DISTILLERY_VLLM_URL") {
        Ok(u) if !u.is_empty() => Some((
            u,
            std::env::var("DISTILLERY_VLLM_MODEL").unwrap_or_else(|_| "tiny".into()),
        )),
        _ => {
            eprintln!(
                "skipping: DISTILLERY_VLLM_URL is not set (scripts/vllm-cpu/serve.sh starts a real vLLM)"
            );
            None
        }
    }
}

/// `pipelines/triples.toml` on the shared samples against a real vLLM (tiny random model:
/// structure only; `max_model_len` 2048), passages fitted to its context, the zero-call
/// rerun, and the same run through a fault-injecting proxy in front of it (which forwards
/// `/v1/models` and `/tokenize` as they are) giving the same outputs.
#[test]
fn triples_pipeline_against_a_real_vllm() {
    let Some((url, model)) = vllm() else { return };
    if crate::shared("hotpotqa/hotpot_dev_distractor_v1.head.json").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let file = repo().join("pipelines/triples.toml");
    // One request at a time, so the server's batches (and so its answers) are the same in
    // every run.
    let base = vec![
        format!("output={}", out.display()),
        format!("llm.model={model}"),
        "llm.max_concurrency=1".to_string(),
        "stages.triples.options.max_passages=6".to_string(),
        "stages.triples.options.max_tokens=128".to_string(),
    ];
    let mut set = base.clone();
    set.push(format!("llm.base_url={url}"));
    set.push(format!("llm.cache={}", tmp.path().join("cache").display()));
    assert!(run_file(&file, &set).status.success());
    let s = summary(&out);
    assert_eq!(counter(&s, "passages"), 6);
    let calls = counter(&s, "llm.calls");
    assert!(calls >= 6, "{calls}");
    assert!(counter(&s, "llm.tokens_in") > 0 && counter(&s, "llm.tokens_out") > 0);
    // vLLM says its context (`max_model_len`) and counts with `/tokenize`: a passage too
    // long for it is cut into pieces, each a doc of the export.
    assert_eq!(counter(&s, "context.counted_chars"), 0);
    let units = 6 - counter(&s, "passages.split") + counter(&s, "pieces");
    let export: Value =
        serde_json::from_slice(&std::fs::read(out.join("openie/openie_results.json")).unwrap())
            .unwrap();
    assert_eq!(
        export["docs"].as_array().unwrap().len() as u64,
        units - counter(&s, "passages.invalid")
    );
    let rows = crate::count(
        &out,
        "SELECT count(*) AS n FROM triples WHERE dataset = 'openie' AND document_id IS NOT NULL",
    );
    assert_eq!(rows as u64, counter(&s, "triples"));
    let before = made(&out);

    // The rerun makes no call at all: answers, refusals (a request too long for the model
    // included) and cuts all come from the cache.
    assert!(run_file(&file, &set).status.success());
    let s_again = summary(&out);
    assert_eq!(counter(&s_again, "llm.calls"), 0);
    assert_eq!(
        counter(&s_again, "llm.rejected"),
        counter(&s, "llm.rejected")
    );
    assert_eq!(made(&out), before);
    // The estimate counts with vLLM's /tokenize.
    let est = estimate(&file, 6, &set);
    assert!(est.contains("/tokenize"), "{est}");

    // Through a fault-injecting proxy, with an empty cache: same outputs.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let proxy = rt.block_on(FaultServer::proxy(
        vec![
            Fault::Status(500),
            Fault::TooMany("0"),
            Fault::Truncated,
            Fault::NotJson,
            Fault::Drop,
        ],
        &url,
    ));
    let out2 = tmp.path().join("out2");
    let mut set2 = base;
    set2[0] = format!("output={}", out2.display());
    set2.push(format!("llm.base_url={}", proxy.url));
    set2.push(format!("llm.cache={}", tmp.path().join("cache2").display()));
    assert!(run_file(&file, &set2).status.success());
    let s2 = summary(&out2);
    assert!(counter(&s2, "llm.retries") >= 5);
    assert_eq!(counter(&s2, "llm.calls"), calls);
    assert_eq!(made(&out2), before);
}

/// A request the server rejects as it is (400: too long for the model, say) quarantines that
/// passage (`llm_rejected`) and the job goes on; the cache keeps the refusal, so a rerun
/// quarantines it again without asking.
#[test]
fn a_rejected_request_quarantines_its_passage() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![Fault::Status(400)], teacher()));
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &server.url, &tmp.path().join("cache"));
    let out = tmp.path().join("out");
    assert!(run_file(&file, &[]).status.success());
    let s = summary(&out);
    assert_eq!(counter(&s, "passages.invalid"), 2);
    assert_eq!(counter(&s, "llm.rejected"), 1);
    let q = sql_json(
        &out,
        "SELECT reason, detail, excerpt FROM quarantine WHERE dataset = 'openie' ORDER BY reason DESC",
    );
    assert_eq!(q.len(), 2);
    assert_eq!(q[0]["reason"], "llm_rejected");
    assert!(
        q[0]["detail"]
            .as_str()
            .unwrap()
            .contains("request rejected: llm server"),
        "{q:?}"
    );
    assert_eq!(q[0]["excerpt"], "injected 400");
    assert_eq!(q[1]["reason"], "llm_invalid_answer");
    let before = made(&out);
    let requests = server.requests();
    assert!(run_file(&file, &[]).status.success());
    let s = summary(&out);
    assert_eq!(counter(&s, "passages.invalid"), 2);
    assert_eq!(counter(&s, "llm.rejected"), 1);
    assert_eq!(counter(&s, "llm.calls"), 0);
    assert_eq!(server.requests(), requests);
    assert_eq!(made(&out), before);
}

/// The stand-in's tokens: a quarter of each message's characters, rounded up, plus 4.
pub(crate) fn stand_in_tokens() -> distillery_testkit::fault_server::TokenCounter {
    std::sync::Arc::new(|body: &Value| {
        body["messages"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .map(|m| {
                        let chars = m["content"].as_str().unwrap_or_default().chars().count();
                        chars.div_ceil(4) as u64 + 4
                    })
                    .sum()
            })
            .unwrap_or(0)
    })
}

/// A teacher whose context is too small for the longer passages (its `/v1/models` says so,
/// its `/tokenize` counts, and it refuses what does not fit, as vLLM does): those passages
/// are cut into pieces that fit, each extracted on its own, with provenance in the original
/// document; a rerun makes no call, even for the request the server refused.
#[test]
fn passages_too_long_for_the_context_are_split_into_pieces() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FaultServer::start_with(vec![Fault::Status(400)], teacher()));
    server.serve_models(&[("stand-in", CONTEXT)]);
    server.tokenize_with(stand_in_tokens());
    let tmp = tempfile::tempdir().unwrap();
    let file = pipeline(tmp.path(), &server.url, &tmp.path().join("cache"));
    let out = tmp.path().join("out");
    let set = vec!["stages.triples.options.max_tokens=64".to_string()];
    assert!(run_file(&file, &set).status.success());
    let s = summary(&out);
    eprintln!("{}", stage(&s, "triples")["counters"]);
    let (passages, split, pieces) = (
        counter(&s, "passages"),
        counter(&s, "passages.split"),
        counter(&s, "pieces"),
    );
    assert!(split > 0 && split < passages, "{split} of {passages}");
    assert!(pieces >= 2 * split, "{pieces} pieces of {split} passages");
    assert!(counter(&s, "context.counted_tokenize") > 0);
    assert_eq!(counter(&s, "context.counted_chars"), 0);
    // Only the scripted refusal: every piece fits.
    assert_eq!(counter(&s, "llm.rejected"), 1);
    let units = passages - split + pieces;
    let invalid = counter(&s, "passages.invalid");
    // The refused request, and the stand-in's refusals of the passage on Oskar Vey (or of
    // its pieces).
    let q = sql_json(
        &out,
        "SELECT reason, detail, excerpt FROM quarantine WHERE dataset = 'openie'",
    );
    assert_eq!(q.len() as u64, invalid);
    assert_eq!(
        q.iter().filter(|r| r["reason"] == "llm_rejected").count(),
        1
    );
    for r in q.iter().filter(|r| r["reason"] != "llm_rejected") {
        assert_eq!(r["excerpt"], "I would rather not say.", "{r}");
    }
    let calls = counter(&s, "llm.calls");
    assert_eq!(server.requests() as u64, calls);
    let ras = std::fs::read_to_string(out.join("openie/ras.jsonl")).unwrap();
    assert_eq!(ras.lines().count() as u64, units - invalid);

    // Every row points into its original document: the supporting sentence's offsets are
    // that sentence's, and it holds a word of the subject or the object.
    let rows = sql_json(
        &out,
        "SELECT t.subject_name, t.object_name, t.sentence, t.start, t.\"end\", d.text, d.sentences \
         FROM triples t JOIN documents d ON t.document_id = d.id WHERE t.dataset = 'openie'",
    );
    assert_eq!(rows.len() as u64, counter(&s, "triples"));
    assert!(!rows.is_empty());
    for r in &rows {
        let (a, b) = (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap());
        let i = r["sentence"].as_u64().unwrap() as usize;
        let sent = &r["sentences"][i];
        assert_eq!(
            (sent["start"].as_u64(), sent["end"].as_u64()),
            (Some(a), Some(b)),
            "{r}"
        );
        let text = char_slice(r["text"].as_str().unwrap(), a as usize, b as usize);
        let words = |name: &str| -> Vec<String> {
            name.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect()
        };
        let mut named = words(r["subject_name"].as_str().unwrap());
        named.extend(words(r["object_name"].as_str().unwrap()));
        assert!(
            named.iter().any(|w| text.contains(w.as_str())),
            "{text:?} for {r}"
        );
    }

    // A rerun: no call (the refusal comes from the cache too), the same pieces (the cuts
    // come from the cache), the same bytes.
    let before = made(&out);
    let requests = server.requests();
    assert!(run_file(&file, &set).status.success());
    let s2 = summary(&out);
    assert_eq!(counter(&s2, "llm.calls"), 0);
    assert_eq!(counter(&s2, "llm.rejected"), 1);
    assert_eq!(counter(&s2, "passages.split"), split);
    assert_eq!(counter(&s2, "pieces"), pieces);
    assert_eq!(server.requests(), requests);
    assert_eq!(made(&out), before);

    // The estimate projects the pieces: with every passage sampled (the file is read whole),
    // exactly the run's, from the cuts the run kept.
    let est = estimate(&file, 1000, &set);
    assert!(
        est.contains(&format!("passages {passages}   calls {}", 2 * units)),
        "{est}"
    );
    assert!(est.contains(&format!("  {units} pieces: ")), "{est}");
    assert_eq!(server.requests(), requests, "the estimate asks no chat");

    // The context from `llm.context_tokens`, against a server that says nothing and does
    // not count: passages are still split, counted at 4 characters a token.
    let bare = rt.block_on(FaultServer::start_with(vec![], teacher()));
    let out2 = tmp.path().join("out2");
    let set2 = vec![
        "stages.triples.options.max_tokens=64".to_string(),
        format!("llm.base_url={}", bare.url),
        format!("llm.cache={}", tmp.path().join("cache2").display()),
        format!("output={}", out2.display()),
        format!("llm.context_tokens={CONTEXT}"),
    ];
    assert!(run_file(&file, &set2).status.success());
    let s3 = summary(&out2);
    assert!(counter(&s3, "passages.split") > 0);
    assert!(counter(&s3, "context.counted_chars") > 0);
    assert_eq!(counter(&s3, "context.counted_tokenize"), 0);
    // No `/models` (the context is configured), one `/tokenize` try per task (2 shards).
    let side = bare.side_requests.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=2).contains(&side), "{side}");
}

/// The stand-in teacher's context in the splitting test: too small for the longer passages
/// next to the prompts and the answers (64 tokens).
pub(crate) const CONTEXT: u64 = 520;
