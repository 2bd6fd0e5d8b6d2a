//! The packed response cache: packing, loose and packed entries together, many writers and
//! readers over one store, damaged packs, and caches written before packs.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use distillery_llm::{
    CacheEntry, CacheKey, Client, LlmError, Outcome, Parser, ResponseCache, Source, Usage,
    cached_chat,
};
use object_store::local::LocalFileSystem;
use serde_json::{Value, json};

use crate::client::{fast_config, request};
use distillery_testkit::fault_server::FaultServer;

struct JsonParser(&'static str);

impl Parser for JsonParser {
    fn version(&self) -> &str {
        self.0
    }

    fn parse(&self, raw: &str) -> Result<Value, String> {
        serde_json::from_str(raw).map_err(|e| e.to_string())
    }
}

/// A cache handle over `dir`, as a new process opens it.
fn cache_in(dir: &Path) -> ResponseCache {
    ResponseCache::new(
        Arc::new(LocalFileSystem::new_with_prefix(dir).unwrap()),
        "llm-cache",
    )
}

fn key(i: usize) -> CacheKey {
    CacheKey::new(
        ("t", "1"),
        "r",
        "1",
        &json!({"model": "m", "messages": [{"role": "user", "content": format!("q{i}")}]}),
    )
}

fn entry(i: usize, raw: &str) -> CacheEntry {
    CacheEntry {
        key: key(i),
        raw: raw.into(),
        parsed: Some(json!({"i": i})),
        invalid_reason: None,
        parser_version: "1".into(),
        usage: Usage {
            prompt_tokens: 3,
            completion_tokens: 1,
        },
        served_model: "m".into(),
        created_at: 1,
        rejected: None,
    }
}

/// Files under `dir/llm-cache/<sub>`, recursively, sorted.
fn files(dir: &Path, sub: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join("llm-cache").join(sub)];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn loose_files(dir: &Path) -> usize {
    files(dir, "")
        .iter()
        .filter(|p| !p.to_string_lossy().contains("/packs/"))
        .count()
}

#[tokio::test]
async fn packed_entries_round_trip_and_a_rerun_makes_no_calls() {
    let server = FaultServer::start(vec![], "{\"ok\": 1}").await;
    let client = Client::new(fast_config(&server.url)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    let qs: Vec<String> = (0..40).map(|i| format!("question {i}")).collect();
    let mut first = Vec::new();
    for q in &qs {
        first.push(ask(&client, &cache, "1", q).await.unwrap());
    }
    assert_eq!(server.requests(), 40);
    assert_eq!(loose_files(dir.path()), 40);

    let report = cache_in(dir.path()).pack(false).await.unwrap();
    assert_eq!((report.loose, report.packed, report.removed), (40, 40, 40));
    assert_eq!(report.packs.len(), 1);
    assert_eq!(
        loose_files(dir.path()),
        0,
        "packed loose entries are removed"
    );
    assert_eq!(files(dir.path(), "packs").len(), 1);

    // A new process: every answer comes from the pack in memory, with no call.
    let client = Client::new(fast_config(&server.url)).unwrap();
    let cache = cache_in(dir.path());
    for (q, before) in qs.iter().zip(&first) {
        match (ask(&client, &cache, "1", q).await.unwrap(), before) {
            (
                Outcome::Parsed {
                    value,
                    raw,
                    cached,
                    entry,
                    ..
                },
                Outcome::Parsed {
                    value: v0,
                    raw: r0,
                    entry: e0,
                    ..
                },
            ) => {
                assert!(cached);
                assert_eq!((&value, &raw, &entry), (v0, r0, e0));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(server.requests(), 40, "a rerun makes no call");
    assert_eq!(client.stats().calls.load(Ordering::Relaxed), 0);
    assert_eq!(cache.stats().packed_hits.load(Ordering::Relaxed), 40);
    assert_eq!(cache.stats().packs_loaded.load(Ordering::Relaxed), 1);

    // Packing again finds nothing loose and writes nothing.
    let again = cache.pack(false).await.unwrap();
    assert_eq!((again.loose, again.packed), (0, 0));
    assert!(again.packs.is_empty());
}

#[tokio::test]
async fn loose_and_packed_entries_mix_and_kept_loose_entries_are_not_packed_twice() {
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    for i in 0..10 {
        assert!(cache.put(&entry(i, &format!("a{i}"))).await.unwrap());
    }
    let r = cache.pack(true).await.unwrap();
    assert_eq!((r.packed, r.removed), (10, 0));
    assert_eq!(loose_files(dir.path()), 10, "keep_loose keeps them");
    for i in 10..15 {
        assert!(cache.put(&entry(i, &format!("a{i}"))).await.unwrap());
    }

    let reader = cache_in(dir.path());
    for i in 0..15 {
        let (e, source) = reader.lookup(&key(i)).await.unwrap().unwrap();
        assert_eq!(e.raw, format!("a{i}"));
        let want = if i < 10 {
            Source::Packed
        } else {
            Source::Loose
        };
        assert_eq!(source, want, "{i}");
    }
    assert!(reader.lookup(&key(99)).await.unwrap().is_none());

    // The ten already packed are left out of the next pack; their loose copies go now.
    let r = reader.pack(false).await.unwrap();
    assert_eq!(
        (r.loose, r.already_packed, r.packed, r.removed),
        (15, 10, 5, 15)
    );
    assert_eq!(files(dir.path(), "packs").len(), 2);
    let last = cache_in(dir.path());
    let keys: Vec<CacheKey> = (0..15).map(key).collect();
    let got = last.get_many(&keys).await.unwrap();
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, e)| { e.as_ref().map(|e| e.raw.as_str()) == Some(format!("a{i}").as_str()) })
    );
    assert_eq!(last.stats().packed_hits.load(Ordering::Relaxed), 15);
}

#[tokio::test]
async fn two_writers_racing_on_one_key_and_packing_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Two processes: their own handles over the same store.
    let (a, b) = (cache_in(dir.path()), cache_in(dir.path()));
    let (ea, eb) = (entry(7, "from a"), entry(7, "from b"));
    let (wa, wb) = tokio::join!(a.put(&ea), b.put(&eb));
    assert_eq!(
        u8::from(wa.unwrap()) + u8::from(wb.unwrap()),
        1,
        "one create wins"
    );
    for i in 0..20 {
        let w = if i % 2 == 0 { &a } else { &b };
        w.put(&entry(100 + i, &format!("e{i}"))).await.unwrap();
    }
    let (ra, rb) = tokio::join!(a.pack(false), b.pack(false));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert!(ra.packed + rb.packed >= 21, "{ra:?} {rb:?}");
    let names: Vec<_> = files(dir.path(), "packs");
    assert_eq!(names.len(), ra.packs.len() + rb.packs.len());
    assert_ne!(ra.packs, rb.packs, "pack names are unique per writer");
    assert_eq!(loose_files(dir.path()), 0);

    let reader = cache_in(dir.path());
    let won = reader.get(&key(7)).await.unwrap().unwrap().raw;
    assert!(won == "from a" || won == "from b");
    for i in 0..20 {
        let e = reader.get(&key(100 + i)).await.unwrap().unwrap();
        assert_eq!(e.raw, format!("e{i}"));
    }
    assert_eq!(reader.stats().packed_hits.load(Ordering::Relaxed), 21);
}

#[tokio::test]
async fn a_reader_sees_a_pack_another_writer_wrote_after_its_first_lookup() {
    let server = FaultServer::start(vec![], "{\"ok\": 2}").await;
    let dir = tempfile::tempdir().unwrap();
    let reader = cache_in(dir.path());
    // The reader reads the (empty) pack list first.
    assert!(reader.lookup(&key(1)).await.unwrap().is_none());

    // Another worker answers, packs and removes its loose entries.
    let writer = cache_in(dir.path());
    let wclient = Client::new(fast_config(&server.url)).unwrap();
    ask(&wclient, &writer, "1", "shared").await.unwrap();
    writer.pack(false).await.unwrap();
    assert_eq!(loose_files(dir.path()), 0);
    assert_eq!(server.requests(), 1);

    // The reader's own pack list is stale, yet it finds the entry and makes no call.
    let rclient = Client::new(fast_config(&server.url)).unwrap();
    match ask(&rclient, &reader, "1", "shared").await.unwrap() {
        Outcome::Parsed { cached, value, .. } => {
            assert!(cached);
            assert_eq!(value, json!({"ok": 2}));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests(), 1);
    assert_eq!(reader.stats().packs_loaded.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_damaged_pack_is_an_error_naming_it_not_a_miss() {
    let server = FaultServer::start(vec![], "{\"ok\": 3}").await;
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    for i in 0..5 {
        cache
            .put(&entry(i, &format!("{{\"n\": {i}}}")))
            .await
            .unwrap();
    }
    let r = cache.pack(false).await.unwrap();
    let pack = files(dir.path(), "packs").pop().unwrap();
    let name = pack.file_name().unwrap().to_string_lossy().into_owned();
    assert!(r.packs[0].ends_with(&name));
    let good = std::fs::read(&pack).unwrap();

    let expect_error = |what: &'static str| {
        let dir = dir.path().to_path_buf();
        let (name, url) = (name.clone(), server.url.clone());
        async move {
            let cache = cache_in(&dir);
            match cache.get(&key(2)).await {
                Err(LlmError::Cache { path, message }) => {
                    assert!(path.ends_with(&name), "{path}");
                    assert!(message.contains(what), "{message}");
                }
                other => panic!("{what}: {other:?}"),
            }
            // cached_chat fails the same way and asks the model nothing.
            let client = Client::new(fast_config(&url)).unwrap();
            let o = ask(&client, &cache, "1", "x").await;
            assert!(matches!(o, Err(LlmError::Cache { .. })));
        }
    };
    std::fs::write(&pack, &good[..good.len() - 7]).unwrap();
    expect_error("truncated").await;
    let mut flipped = good.clone();
    let at = good.len() - 3;
    flipped[at] ^= 0x01;
    std::fs::write(&pack, &flipped).unwrap();
    expect_error("checksum").await;
    std::fs::write(&pack, b"not a pack at all").unwrap();
    expect_error("magic").await;
    assert_eq!(server.requests(), 0);

    // Restored, the pack reads again.
    std::fs::write(&pack, &good).unwrap();
    let e = cache_in(dir.path()).get(&key(2)).await.unwrap().unwrap();
    assert_eq!(e.raw, "{\"n\": 2}");
}

#[tokio::test]
async fn a_cache_written_before_packs_is_still_read_and_can_be_packed() {
    let dir = tempfile::tempdir().unwrap();
    // An entry as the one-object-per-entry layout wrote it, byte for byte.
    let k = key(3);
    let digest = k.digest();
    let old = format!(
        concat!(
            r#"{{"key":{{"template_id":"t","template_version":"1","request_hash":"{}","#,
            r#""model":"m","model_revision":"r","decoding":"{{}}","schema_version":"1"}},"#,
            r#""raw":"{{\"old\": true}}","parsed":{{"old":true}},"invalid_reason":null,"#,
            r#""parser_version":"1","usage":{{"prompt_tokens":5,"completion_tokens":2}},"#,
            r#""served_model":"m","created_at":1700000000}}"#
        ),
        k.request_hash
    );
    let at = dir
        .path()
        .join("llm-cache")
        .join(&digest[..2])
        .join(format!("{digest}.json"));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(&at, old).unwrap();

    let cache = cache_in(dir.path());
    let (e, source) = cache.lookup(&k).await.unwrap().unwrap();
    assert_eq!(source, Source::Loose);
    assert_eq!(e.parsed, Some(json!({"old": true})));
    assert_eq!(e.usage.prompt_tokens, 5);
    assert!(e.rejected.is_none());

    let r = cache.pack(false).await.unwrap();
    assert_eq!((r.packed, r.removed), (1, 1));
    assert!(!at.exists());
    let (e2, source) = cache_in(dir.path()).lookup(&k).await.unwrap().unwrap();
    assert_eq!(source, Source::Packed);
    assert_eq!(*e2, *e);
}

#[tokio::test]
async fn a_parse_newer_than_the_pack_wins_and_is_packed_next() {
    let server = FaultServer::start(vec![], "{\"ok\": 4}").await;
    let dir = tempfile::tempdir().unwrap();
    let client = Client::new(fast_config(&server.url)).unwrap();
    ask(&client, &cache_in(dir.path()), "1", "p").await.unwrap();
    cache_in(dir.path()).pack(false).await.unwrap();
    // Parser 2 re-parses the packed answer and writes the new parse loose.
    let c2 = cache_in(dir.path());
    assert!(matches!(
        ask(&client, &c2, "2", "p").await.unwrap(),
        Outcome::Parsed { reparsed: true, .. }
    ));
    assert_eq!(loose_files(dir.path()), 1);
    // A new process with parser 2 takes the loose parse: no re-parse, no call.
    let c3 = cache_in(dir.path());
    assert!(matches!(
        ask(&client, &c3, "2", "p").await.unwrap(),
        Outcome::Parsed {
            reparsed: false,
            cached: true,
            ..
        }
    ));
    assert_eq!(c3.stats().reparsed.load(Ordering::Relaxed), 0);
    // Packed again, the newest parse is the one kept.
    let r = c3.pack(false).await.unwrap();
    assert_eq!((r.packed, r.removed), (1, 1));
    let c4 = cache_in(dir.path());
    let (e, source) = c4
        .lookup(&key_of_request(&client, "p"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((source, e.parser_version.as_str()), (Source::Packed, "2"));
    assert_eq!(server.requests(), 1);
}

/// One cached chat of question `q`, parsed by parser `version`.
async fn ask(
    client: &Client,
    cache: &ResponseCache,
    version: &'static str,
    q: &str,
) -> Result<Outcome, LlmError> {
    let parser = JsonParser(version);
    let req = request(q);
    cached_chat(client, cache, ("t", "1"), ("r", "s"), &parser, &req).await
}

fn key_of_request(client: &Client, q: &str) -> CacheKey {
    CacheKey::new(("t", "1"), "r", "s", &client.request_body(&request(q)))
}
