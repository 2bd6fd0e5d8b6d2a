use std::sync::Arc;

use distillery_core::Document;
use object_store::path::Path;

use super::*;

fn day(date: &str, max: i64) -> Day {
    Day {
        wiki: "enwiki".into(),
        date: date.into(),
        max_rev_id: max,
    }
}

#[test]
fn days_apply_in_order_repeats_are_skipped_and_gaps_refused() {
    let applied = vec![day("20261130", 100)];
    let (apply, rep) = plan_days(
        &applied,
        &[
            day("20261202", 300),
            day("20261201", 200),
            day("20261130", 100),
        ],
        false,
    )
    .unwrap();
    assert_eq!(apply, vec![day("20261201", 200), day("20261202", 300)]);
    assert_eq!(rep, vec![day("20261130", 100)]);
    // Month ends: 20261130 is followed by 20261201, not 20261131.
    let e = plan_days(&applied, &[day("20261203", 300)], false).unwrap_err();
    assert!(e.contains("day 20261201 is missing"), "{e}");
    let (apply, _) = plan_days(&applied, &[day("20261203", 300)], true).unwrap();
    assert_eq!(apply.len(), 1);
    let e = plan_days(&applied, &[day("20261129", 50)], false).unwrap_err();
    assert!(e.contains("older than the last applied"), "{e}");
    let e = plan_days(&applied, &[day("20261201", 90)], false).unwrap_err();
    assert!(e.contains("maxrevid 90"), "{e}");
    assert!(plan_days(&[], &[day("20260231", 1)], false).is_err());
    assert_eq!(day_number("19700101"), Some(0));
    assert_eq!(
        day_number("20000301").map(|n| date_of(n - 1)),
        Some("20000229".into())
    );
}

#[test]
fn day_numbers_and_dates_round_trip() {
    assert_eq!(day_number("20251126"), Some(20_418));
    assert_eq!(day_number("20000229"), Some(11_016));
    assert_eq!(day_number("99991231"), Some(2_932_896));
    for bad in [
        "20260231",
        "20250229",
        "19000229",
        "20261131",
        "20261301",
        "20260001",
        "20260100",
        "19691231",
        "00000101",
        "2026121",
        "202612011",
        "2026-1201",
        "２0261201",
    ] {
        assert_eq!(day_number(bad), None, "{bad}");
    }
    assert_eq!(date_of(0), "19700101");
    assert_eq!(date_of(-5), "19700101");
    assert_eq!(date_of(20_418), "20251126");
    assert_eq!(date_of(11_016), "20000229");
    assert_eq!(date_of(2_932_896), "99991231");
    assert_eq!(date_of(2_932_897), "99991231");
    for n in [
        0, 59, 365, 10_956, 11_016, 11_017, 20_418, 47_540, 2_932_896,
    ] {
        assert_eq!(day_number(&date_of(n)), Some(n), "{n}");
    }
}

fn local(dir: &std::path::Path) -> Root {
    Root {
        store: Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap()),
        prefix: Path::from(""),
        display: dir.display().to_string(),
        local_dir: Some(dir.to_path_buf()),
    }
}

fn doc(page: i64, title: &str, rev: i64, text: &str) -> Document {
    Document {
        id: format!("{title}@{rev}"),
        dataset: "mediawiki".into(),
        uri: format!("enwiki:{title}"),
        title: title.into(),
        page_id: Some(page),
        revision_id: Some(rev),
        timestamp: Some(format!("2026-12-01T00:00:{:02}Z", rev % 60)),
        text: text.into(),
        ..Default::default()
    }
}

/// Applies one night of `docs` and `dels` to the root; returns the published manifest.
async fn night(root: &Root, docs: &[Document], dels: Vec<Deletion>) -> Option<Manifest> {
    let prev = current(root).await.unwrap();
    let mut n = Night::new(prev.clone(), "t");
    docs.iter().for_each(|d| n.see(d));
    dels.into_iter().for_each(|d| n.delete(d));
    n.resolve(root).await.unwrap();
    if prev.is_some() && n.is_empty() {
        return None;
    }
    let mut w = PartWriter::new(root, &n.version, n.seq);
    for d in docs {
        if n.keep(d) {
            w.push(d.clone()).await.unwrap();
        }
    }
    let parts = w.finish().await.unwrap();
    let (m, _) = n.finish(root, parts, Vec::new(), "h", "s").await.unwrap();
    publish(root, &m).await.unwrap();
    Some(m)
}

async fn view(root: &Root) -> Vec<(i64, String, i64)> {
    let m = current(root).await.unwrap().unwrap();
    let mut out = Vec::new();
    let mut v = LiveView::open(root, &m).await.unwrap();
    while let Some(docs) = v.next(root, &m).await.unwrap() {
        out.extend(
            docs.into_iter()
                .map(|d| (d.page_id.unwrap(), d.title, d.revision_id.unwrap())),
        );
    }
    assert_eq!(v.count, m.pages, "the manifest's page count is the view's");
    out.sort();
    out
}

fn del(title: &str, at: i64, restore: bool) -> Deletion {
    Deletion {
        title: title.into(),
        page_id: None,
        timestamp: Some(format!("2026-12-01T00:00:{at:02}Z")),
        restore,
    }
}

#[tokio::test]
async fn nights_change_move_delete_and_restore_pages() {
    let tmp = tempfile::tempdir().unwrap();
    let root = local(tmp.path());
    let base = night(
        &root,
        &[
            doc(1, "A", 1, "a"),
            doc(2, "B", 2, "b"),
            doc(3, "C", 3, "c"),
        ],
        vec![],
    )
    .await
    .unwrap();
    // Night 1: A edited twice (newest wins), B moved to B2 (its old title a new redirect page
    // 4), C deleted, D added then deleted later the same night, and E added.
    let n1 = night(
        &root,
        &[
            doc(1, "A", 10, "a1"),
            doc(1, "A", 11, "a2"),
            doc(2, "B2", 12, "b"),
            doc(4, "B", 13, "#REDIRECT [[B2]]"),
            doc(5, "D", 14, "d"),
            doc(6, "E", 15, "e"),
        ],
        vec![
            del("C", 20, false),
            del("D", 21, false),
            del("Nobody", 22, false),
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        view(&root).await,
        vec![
            (1, "A".into(), 11),
            (2, "B2".into(), 12),
            (4, "B".into(), 13),
            (6, "E".into(), 15)
        ]
    );
    let c = &n1.counts;
    assert_eq!(
        (c.added, c.changed, c.moved, c.deleted, c.unmatched),
        (2, 1, 1, 1, 1),
        "{c:?}"
    );
    // Night 2: C restored; a repeat of night 1's rows is stale and writes nothing.
    let n2 = night(&root, &[doc(1, "A", 11, "a2")], vec![del("C", 30, true)])
        .await
        .unwrap();
    assert_eq!((n2.counts.restored, n2.counts.stale), (1, 1));
    assert!(view(&root).await.contains(&(3, "C".into(), 3)));
    // A night of nothing new publishes nothing.
    assert!(
        night(&root, &[doc(6, "E", 15, "e")], vec![])
            .await
            .is_none()
    );

    // What changed since the base, one row per page.
    let ch = changes_since(&root, &base.version).await.unwrap();
    let got: Vec<(String, String)> = ch
        .iter()
        .map(|c| (c.title.clone(), c.kind.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("A".into(), "changed".into()),
            ("B2".into(), "moved".into()),
            ("B".into(), "added".into()),
            ("E".into(), "added".into()),
        ],
        "C deleted and restored is no change; D added and deleted is none"
    );
    assert!(changes_since(&root, "nope").await.is_err());

    // Compaction keeps the view and drops the tombstones.
    let before = view(&root).await;
    let mut m = current(&root).await.unwrap().unwrap();
    compact(&root, &mut m).await.unwrap();
    assert!(m.tombstones.is_empty() && m.compacted);
    publish(&root, &m).await.unwrap();
    assert_eq!(view(&root).await, before);

    // Pruning keeps what the kept versions read.
    let all = list(&root).await.unwrap();
    assert_eq!(all.len(), 3);
    rollback(&root, &n1.version).await.unwrap();
    assert_eq!(view(&root).await.len(), 4);
    rollback(&root, &m.version).await.unwrap();
    prune(&root, 1).await.unwrap();
    assert_eq!(view(&root).await, before);
    assert!(rollback(&root, &base.version).await.is_err());

    // A rebase is numbered after what it replaces, so pruning keeps it and its nights.
    let rebase = Night::base_at(m.seq + 1, "r");
    assert_eq!(rebase.seq, m.seq + 1);
    assert!(
        rebase.version > m.version,
        "{} {}",
        rebase.version,
        m.version
    );
}

#[tokio::test]
async fn a_night_killed_before_its_switch_leaves_current_and_is_redone() {
    let tmp = tempfile::tempdir().unwrap();
    let root = local(tmp.path());
    night(&root, &[doc(1, "A", 1, "a"), doc(2, "B", 2, "b")], vec![])
        .await
        .unwrap();
    let before = current(&root).await.unwrap().unwrap();
    // A night writes its parts, tombstones and changes, and dies before `publish`.
    let mut n = Night::new(Some(before.clone()), "killed");
    let edit = doc(1, "A", 5, "a5");
    n.see(&edit);
    n.delete(del("B", 59, false));
    n.resolve(&root).await.unwrap();
    let mut w = PartWriter::new(&root, &n.version, n.seq);
    assert!(n.keep(&edit));
    w.push(edit.clone()).await.unwrap();
    let parts = w.finish().await.unwrap();
    let (half, _) = n.finish(&root, parts, Vec::new(), "h", "s").await.unwrap();
    assert_eq!(
        current(&root).await.unwrap().unwrap(),
        before,
        "CURRENT unmoved"
    );
    assert_eq!(
        view(&root).await,
        vec![(1, "A".into(), 1), (2, "B".into(), 2)]
    );
    let listed = list(&root).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|v| v.version == half.version && v.manifest.is_none())
    );
    // The next run applies the night in full.
    night(&root, &[edit], vec![del("B", 59, false)])
        .await
        .unwrap();
    assert_eq!(view(&root).await, vec![(1, "A".into(), 5)]);
    // Pruning removes the unfinished version with the old ones.
    prune(&root, 1).await.unwrap();
    assert!(
        !tmp.path()
            .join("versions")
            .join(&half.version)
            .join("documents")
            .exists()
    );
}

/// One segment per sentence-like piece of a document's text (none for an empty text), as a
/// corpus keeps them: named by the page.
fn segs_of(d: &Document) -> Vec<distillery_core::Segment> {
    d.text
        .split('.')
        .filter(|t| !t.trim().is_empty())
        .enumerate()
        .map(|(i, t)| distillery_core::Segment {
            id: format!("{}/{}/{i}", d.uri, d.revision_id.unwrap()),
            level: "sentence".into(),
            content: t.trim().into(),
            source_id: d.id.clone(),
            uri: d.uri.clone(),
            page_id: d.page_id,
            ..Default::default()
        })
        .collect()
}

/// [`night`] with the segments of the pages written.
async fn night_segs(root: &Root, docs: &[Document], dels: Vec<Deletion>) -> Manifest {
    let prev = current(root).await.unwrap();
    let mut n = Night::new(prev.clone(), "t");
    docs.iter().for_each(|d| n.see(d));
    dels.into_iter().for_each(|d| n.delete(d));
    n.resolve(root).await.unwrap();
    let mut w = PartWriter::new(root, &n.version, n.seq);
    let mut sw = PartWriter::<distillery_core::Segment>::new(root, &n.version, n.seq);
    for d in docs {
        if n.keep(d) {
            w.push(d.clone()).await.unwrap();
            for s in segs_of(d) {
                sw.push(s).await.unwrap();
            }
        }
    }
    let parts = w.finish().await.unwrap();
    let (mut m, _) = n.finish(root, parts, Vec::new(), "h", "s").await.unwrap();
    m.segment_parts.extend(sw.finish().await.unwrap());
    m.segments = Some("{}".into());
    publish(root, &m).await.unwrap();
    m
}

/// The live segments of `m`, sorted, and those the live documents give.
async fn live_segments(root: &Root, m: &Manifest) -> (Vec<String>, Vec<String>) {
    let mut got = Vec::new();
    let mut v = SegmentView::open(root, m).await.unwrap();
    while let Some(segs) = v.next(root, m).await.unwrap() {
        got.extend(segs.into_iter().map(|s| format!("{} {}", s.id, s.content)));
    }
    let mut want = Vec::new();
    let mut v = LiveView::open(root, m).await.unwrap();
    while let Some(docs) = v.next(root, m).await.unwrap() {
        for d in &docs {
            want.extend(
                segs_of(d)
                    .into_iter()
                    .map(|s| format!("{} {}", s.id, s.content)),
            );
        }
    }
    got.sort();
    want.sort();
    (got, want)
}

#[tokio::test]
async fn segments_follow_their_pages_through_nights_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let root = local(dir.path());
    let base = [
        doc(1, "A", 10, "a one. a two."),
        doc(2, "B", 11, "b one."),
        doc(3, "C", 12, "c one. c two. c three."),
    ];
    let m = night_segs(&root, &base, Vec::new()).await;
    let (got, want) = live_segments(&root, &m).await;
    assert_eq!(got.len(), 6);
    assert_eq!(got, want);
    // A changed page, a page emptied (no segments now: its old ones must not show), a new
    // page and a deletion.
    let del = Deletion {
        title: "B".into(),
        page_id: Some(2),
        timestamp: None,
        restore: false,
    };
    let n1 = [
        doc(1, "A", 20, "a new."),
        doc(3, "C", 21, ""),
        doc(4, "D", 22, "d one."),
    ];
    let m = night_segs(&root, &n1, vec![del]).await;
    let (got, want) = live_segments(&root, &m).await;
    assert_eq!(got, want);
    assert!(
        got.iter().all(|s| !s.contains(" c ") && !s.contains(" b ")),
        "{got:?}"
    );
    assert_eq!(got.len(), 2, "{got:?}");
    // The delta from the base: only the second night's segments.
    let delta = delta_since(&root, &m, &m.previous.clone().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(delta.view.segment_parts.len(), 1);
    let mut v = SegmentView::open(&root, &delta.view).await.unwrap();
    let mut n = 0;
    while let Some(segs) = v.next(&root, &delta.view).await.unwrap() {
        n += segs.len();
    }
    assert_eq!(n, 2);
    // Compaction keeps the live segments and drops the rest.
    let mut m = m;
    compact(&root, &mut m).await.unwrap();
    assert_eq!(m.segment_parts.len(), 1);
    assert_eq!(m.segment_parts[0].rows, 2);
    let (got2, _) = live_segments(&root, &m).await;
    assert_eq!(got2, got);
}
