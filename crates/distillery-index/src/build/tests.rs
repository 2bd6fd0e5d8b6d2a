//! Tests of [`super`]: shards grown past their limit, a failed build, delta passage parts
//! and their compaction, and the revision a BM25 entry names.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::dense::ModelInfo;
use crate::search::Searcher;

fn root(dir: &Path) -> Root {
    std::fs::create_dir_all(dir).unwrap();
    Root {
        store: Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap()),
        prefix: object_store::path::Path::from(""),
        display: dir.display().to_string(),
        local_dir: Some(dir.to_path_buf()),
    }
}

fn spec(scratch: &Path, shards: u32, max: u64, incremental: bool) -> BuildSpec {
    BuildSpec {
        bm25: true,
        dense: false,
        kg: false,
        unit: Unit::Paragraph,
        shards,
        max_shard_passages: max,
        incremental,
        keep_versions: 3,
        pipeline_hash: String::new(),
        source: "test".into(),
        scratch: scratch.to_path_buf(),
        batch: 8,
        delta: None,
        kg_wikis: Vec::new(),
        corpus: None,
    }
}

fn spool(dir: &Path, shards: u32, grow: bool, n: usize) -> Spool {
    let mut s = Spool::new(dir, shards, grow);
    for i in 0..n {
        let text = format!("passage number {i} about topic{i}");
        s.push(Passage::new(
            format!("doc{i}#p0"),
            format!("doc{i}"),
            format!("T{i}"),
            text,
        ))
        .unwrap();
    }
    s
}

#[tokio::test]
async fn delta_builds_write_passage_parts_until_they_are_compacted() {
    let tmp = tempfile::tempdir().unwrap();
    let r = root(&tmp.path().join("root"));
    let mk = |i: usize, v: usize| {
        Passage::new(
            format!("enwiki:Doc {i}#p0"),
            format!("enwiki:Doc {i}"),
            format!("T{i}"),
            format!("passage {i} about topic{i} version{v}"),
        )
    };
    let mut s = Spool::new(&tmp.path().join("s0"), 1, false);
    (0..6).for_each(|i| s.push(mk(i, 0)).unwrap());
    build(
        &r,
        &spec(&tmp.path().join("b0"), 1, 0, true),
        s,
        None,
        None,
        None,
    )
    .await
    .unwrap();
    let mut deltas_seen = Vec::new();
    for night in 1..=12usize {
        let k = night % 6;
        let mut s = Spool::new(&tmp.path().join(format!("s{night}")), 1, false);
        s.push(mk(k, night)).unwrap();
        let mut sp = spec(&tmp.path().join(format!("b{night}")), 1, 0, true);
        sp.delta = Some(Arc::new(HashSet::from([format!("enwiki:Doc {k}")])));
        let b = build(&r, &sp, s, None, None, None).await.unwrap();
        assert_eq!(b.manifest.passages, 6, "night {night}");
        let deltas = (b.manifest.files.iter())
            .filter(|f| f.path.starts_with("passages/shard-0000.d"))
            .count();
        deltas_seen.push(deltas);
        let opened = version::open(&r, None, tmp.path()).await.unwrap();
        let searcher = Searcher::open(opened).unwrap();
        for i in 0..6 {
            let hits = searcher.bm25(&format!("topic{i}"), 1).unwrap();
            let v = (1..=night).rev().find(|n| n % 6 == i).unwrap_or(0);
            assert_eq!(hits[0].text, mk(i, v).text, "night {night}, doc {i}");
        }
    }
    // One part a night up to the limit, then the shard written whole again.
    let max = passage_parts::MAX_DELTAS as usize;
    assert_eq!(deltas_seen[..max], (1..=max).collect::<Vec<_>>()[..]);
    assert_eq!(deltas_seen[max], 0, "{deltas_seen:?}");
    assert_eq!(deltas_seen[max + 1], 1, "{deltas_seen:?}");
}

#[tokio::test]
async fn a_new_revision_of_the_same_text_is_named_by_its_bm25_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let r = root(&tmp.path().join("root"));
    let scratch = tmp.path().join("scratch");
    let revised = |dir: &str, rev: i64| {
        let mut s = Spool::new(&tmp.path().join(dir), 2, false);
        for i in 0..6 {
            let p = Passage::new(
                format!("doc{i}#p0"),
                format!("enwiki:Doc {i}"),
                format!("T{i}"),
                format!("passage number {i} about topic{i}"),
            );
            let rev = if i == 0 { rev } else { 1 };
            s.push(p.from_revision(Some(i), Some(rev))).unwrap();
        }
        s
    };
    for (n, rev) in [(1, 1), (2, 7)] {
        let b = build(
            &r,
            &spec(&scratch.join(n.to_string()), 2, 0, true),
            revised(&format!("s{n}"), rev),
            None,
            None,
            None,
        )
        .await
        .unwrap();
        assert_eq!(b.manifest.changes.changed, 0);
        let opened = version::open(&r, None, tmp.path()).await.unwrap();
        let hits = Searcher::open(opened).unwrap().bm25("topic0", 1).unwrap();
        assert_eq!((hits[0].page_id, hits[0].revision_id), (Some(0), Some(rev)));
    }
}

#[tokio::test]
async fn a_build_grows_its_shards_past_the_limit_and_keeps_them() {
    let tmp = tempfile::tempdir().unwrap();
    let r = root(&tmp.path().join("root"));
    let scratch = tmp.path().join("scratch");
    // 10 passages, at most 3 a shard: 4 shards.
    let b = build(
        &r,
        &spec(&scratch.join("1"), 1, 3, true),
        spool(&tmp.path().join("s1"), 1, true, 10),
        None,
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!(b.manifest.shards, 4);
    assert_eq!(b.manifest.passages, 10);
    let opened = version::open(&r, None, tmp.path()).await.unwrap();
    let searcher = Searcher::open(opened).unwrap();
    for i in [0, 3, 9] {
        let hits = searcher.bm25(&format!("topic{i}"), 1).unwrap();
        assert_eq!(hits[0].id, format!("doc{i}#p0"));
    }
    // The same input again: the version is kept.
    let again = build(
        &r,
        &spec(&scratch.join("2"), 1, 3, true),
        spool(&tmp.path().join("s2"), 1, true, 10),
        None,
        None,
        None,
    )
    .await
    .unwrap();
    assert!(again.reused);
    assert_eq!(again.manifest.version, b.manifest.version);
    // Fewer passages, incremental: the shard count stays (no full rebuild), deletes apply.
    let fewer = build(
        &r,
        &spec(&scratch.join("3"), 1, 3, true),
        spool(&tmp.path().join("s3"), 1, true, 6),
        None,
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!(fewer.manifest.shards, 4);
    assert_eq!(fewer.manifest.changes.deleted, 4);
    assert_eq!(
        fewer.manifest.previous.as_deref(),
        Some(b.manifest.version.as_str())
    );
    // A fixed count that is not a power of two stays fixed.
    let fixed = build(
        &root(&tmp.path().join("fixed")),
        &spec(&scratch.join("4"), 3, 3, false),
        spool(&tmp.path().join("s4"), 3, true, 10),
        None,
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!(fixed.manifest.shards, 3);
}

/// Embeds the first `ok` calls, then fails.
struct Failing {
    model: ModelInfo,
    ok: usize,
    calls: std::sync::atomic::AtomicUsize,
}

impl Embedder for Failing {
    fn model(&self) -> &ModelInfo {
        &self.model
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> futures::future::BoxFuture<'a, Result<Vec<Vec<f32>>, IndexError>> {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            if n >= self.ok {
                return Err(IndexError::Invalid("embedding server went away".into()));
            }
            Ok(texts.iter().map(|_| vec![0.6, 0.8]).collect())
        })
    }
}

#[tokio::test]
async fn a_failed_build_leaves_no_version_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("root");
    let r = root(&dir);
    let scratch = tmp.path().join("scratch");
    let first = build(
        &r,
        &spec(&scratch.join("1"), 2, 0, false),
        spool(&tmp.path().join("s1"), 2, false, 6),
        None,
        None,
        None,
    )
    .await
    .unwrap();
    // The second build writes its first shard (BM25 and vectors), then its embedder fails.
    let failing = Failing {
        model: ModelInfo::test(2),
        ok: 1,
        calls: Default::default(),
    };
    let dense = BuildSpec {
        dense: true,
        batch: 64,
        ..spec(&scratch.join("2"), 2, 0, false)
    };
    let err = build(
        &r,
        &dense,
        spool(&tmp.path().join("s2"), 2, false, 6),
        None,
        Some(&failing),
        None,
    )
    .await
    .map(|_| ())
    .unwrap_err();
    assert!(err.to_string().contains("went away"), "{err}");
    assert_eq!(failing.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    let versions: Vec<String> = std::fs::read_dir(dir.join("versions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(versions, vec![first.manifest.version.clone()]);
    assert_eq!(
        version::current(&r).await.unwrap().as_deref(),
        Some(first.manifest.version.as_str())
    );
}
