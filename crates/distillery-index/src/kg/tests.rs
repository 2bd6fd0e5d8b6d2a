//! Tests of the KG index: the build and lookups.

use super::graphml::xml_escape;
use super::*;
use arrow::array::RecordBatch;

/// Runs the async build on a runtime of its own.
fn write(
    dir: &Path,
    edges: impl IntoIterator<Item = KgEdge>,
) -> Result<(KgStats, Vec<String>), IndexError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(write_kg(dir, edges))
}

fn edge(
    s: &str,
    r: &str,
    o: &str,
    kind: &str,
    sn: Option<&str>,
    on: Option<&str>,
    src: &str,
) -> KgEdge {
    KgEdge {
        subject: s.into(),
        relation: r.into(),
        object: o.into(),
        object_kind: kind.into(),
        subject_name: sn.map(Into::into),
        object_name: on.map(Into::into),
        source: src.into(),
    }
}

fn hit(s: &str, r: &str, o: &str, src: &str) -> KgHit {
    KgHit {
        subject: s.into(),
        relation: r.into(),
        object: o.into(),
        source: src.into(),
    }
}

fn read_all(path: &Path) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

fn metaqa() -> Vec<KgEdge> {
    let m = |s: &str, r: &str, o: &str| edge(s, r, o, "entity", None, None, "metaqa");
    vec![
        m("Kismet", "directed_by", "William Dieterle"),
        m("Kismet", "written_by", "Edward Knoblock"),
        m("Kismet", "starred_actors", "Marlene Dietrich"),
        m("Kismet", "release_year", "1944"),
        m("Blonde Venus", "starred_actors", "Marlene Dietrich"),
        m("Blonde Venus", "directed_by", "Josef von Sternberg"),
        m("The Blue Angel", "directed_by", "Josef von Sternberg"),
        m("The Blue Angel", "starred_actors", "Marlene Dietrich"),
    ]
}

fn freebase() -> Vec<KgEdge> {
    vec![
        edge(
            "m.01",
            "film.film.directed_by",
            "m.02",
            "entity",
            Some("Tom & Jerry <Movie>"),
            Some("Joe \"Hanna\""),
            "freebase",
        ),
        // An exact duplicate (names differ: still the same edge).
        edge(
            "m.01",
            "film.film.directed_by",
            "m.02",
            "entity",
            None,
            Some("Other name"),
            "freebase",
        ),
        edge(
            "m.01",
            "film.film.initial_release_date",
            "1975",
            "literal",
            None,
            None,
            "freebase",
        ),
        // Same literal text from MetaQA's entity "1944" vs a Freebase literal "1944".
        edge(
            "m.01",
            "film.film.release_year",
            "1944",
            "literal",
            None,
            None,
            "freebase",
        ),
        edge(
            "m.02",
            "type.object.type",
            "http://rdf.freebase.com/ns/people.person",
            "iri",
            None,
            None,
            "freebase",
        ),
        // The same edge from another source is not a duplicate.
        edge(
            "m.01",
            "film.film.directed_by",
            "m.02",
            "entity",
            None,
            None,
            "wikidata",
        ),
    ]
}

fn build() -> (tempfile::TempDir, KgStats, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut edges = metaqa();
    edges.extend(freebase());
    // A duplicate MetaQA edge.
    edges.push(edge(
        "Kismet",
        "directed_by",
        "William Dieterle",
        "entity",
        None,
        None,
        "metaqa",
    ));
    let (stats, files) = write(dir.path(), edges).unwrap();
    (dir, stats, files)
}

#[test]
fn kg_counts_and_files() {
    let (dir, stats, files) = build();
    assert_eq!(
        files,
        vec![
            "adjacency.bin",
            "edges_by_object.parquet",
            "edges_by_subject.parquet",
            "graph.graphml",
            "nodes.parquet"
        ]
    );
    for f in &files {
        assert!(dir.path().join(f).is_file(), "{f} missing");
    }
    // MetaQA: Kismet, William Dieterle, Edward Knoblock, Marlene Dietrich, 1944 (entity),
    // Blonde Venus, Josef von Sternberg, The Blue Angel = 8.
    // Freebase: m.01, m.02, 1975 (literal), 1944 (literal), the iri = 5.
    assert_eq!(
        stats,
        KgStats {
            nodes: 13,
            edges: 8 + 5,
            literals: 2,
            duplicates: 2,
            cvt: 0,
            wikis: Vec::new(),
        }
    );
    let idx = KgIndex::open(dir.path()).unwrap();
    assert_eq!(idx.len(), 13);
    assert!(!idx.is_empty());
}

#[test]
fn kg_out_and_in_edges() {
    let (dir, _, _) = build();
    let idx = KgIndex::open(dir.path()).unwrap();
    assert_eq!(
        idx.out_edges("Kismet").unwrap(),
        vec![
            hit("Kismet", "directed_by", "William Dieterle", "metaqa"),
            hit("Kismet", "release_year", "1944", "metaqa"),
            hit("Kismet", "starred_actors", "Marlene Dietrich", "metaqa"),
            hit("Kismet", "written_by", "Edward Knoblock", "metaqa"),
        ]
    );
    let into_marlene = idx.in_edges("Marlene Dietrich").unwrap();
    assert_eq!(
        into_marlene,
        vec![
            hit(
                "Blonde Venus",
                "starred_actors",
                "Marlene Dietrich",
                "metaqa"
            ),
            hit("Kismet", "starred_actors", "Marlene Dietrich", "metaqa"),
            hit(
                "The Blue Angel",
                "starred_actors",
                "Marlene Dietrich",
                "metaqa"
            ),
        ]
    );
    // No edges in one direction.
    assert!(idx.out_edges("Marlene Dietrich").unwrap().is_empty());
    assert!(idx.in_edges("Kismet").unwrap().is_empty());
    // Freebase: duplicate removed, other source kept, literal objects.
    assert_eq!(
        idx.out_edges("m.01").unwrap(),
        vec![
            hit("m.01", "film.film.directed_by", "m.02", "freebase"),
            hit("m.01", "film.film.directed_by", "m.02", "wikidata"),
            hit("m.01", "film.film.initial_release_date", "1975", "freebase"),
            hit("m.01", "film.film.release_year", "1944", "freebase"),
        ]
    );
    assert_eq!(
        idx.in_edges("m.02").unwrap(),
        vec![
            hit("m.01", "film.film.directed_by", "m.02", "freebase"),
            hit("m.01", "film.film.directed_by", "m.02", "wikidata"),
        ]
    );
    assert_eq!(
        idx.out_edges("m.02").unwrap(),
        vec![hit(
            "m.02",
            "type.object.type",
            "http://rdf.freebase.com/ns/people.person",
            "freebase"
        )]
    );
    // "1944" is both a MetaQA entity and a Freebase literal: the entity is preferred.
    assert_eq!(
        idx.in_edges("1944").unwrap(),
        vec![hit("Kismet", "release_year", "1944", "metaqa")]
    );
    let n = idx.node("1944").unwrap();
    assert_eq!(n.kind, "entity");
    let lit = idx.node("1975").unwrap();
    assert_eq!(lit.kind, "literal");
    assert_eq!(lit.name, None);
    assert_eq!(
        idx.in_edges("1975").unwrap(),
        vec![hit(
            "m.01",
            "film.film.initial_release_date",
            "1975",
            "freebase"
        )]
    );
    assert_eq!(
        idx.node("http://rdf.freebase.com/ns/people.person")
            .unwrap()
            .kind,
        "iri"
    );
}

#[test]
fn kg_nodes_names_and_unknown_keys() {
    let (dir, _, _) = build();
    let idx = KgIndex::open(dir.path()).unwrap();
    let m01 = idx.node("m.01").unwrap();
    assert_eq!(m01.name.as_deref(), Some("Tom & Jerry <Movie>"));
    assert_eq!(m01.kind, "entity");
    // The smallest non-empty name, whatever the input order.
    assert_eq!(
        idx.node("m.02").unwrap().name.as_deref(),
        Some("Joe \"Hanna\"")
    );
    assert_eq!(idx.node("Kismet").unwrap().name, None);
    assert!(idx.node("m.99").is_none());
    assert!(idx.node("").is_none());
    assert!(idx.out_edges("m.99").unwrap().is_empty());
    assert!(idx.in_edges("zzz").unwrap().is_empty());
    // Ids are the rows, in (key, kind) byte order.
    let a = idx.node("Blonde Venus").unwrap().id;
    let b = idx.node("Kismet").unwrap().id;
    let c = idx.node("m.01").unwrap().id;
    assert!(a < b && b < c);
    // "1944" (entity), "1944" (literal), "1975" (literal): same key, entity first.
    assert_eq!(
        idx.node("1944").unwrap().id + 2,
        idx.node("1975").unwrap().id
    );
}

#[test]
fn kg_offsets_are_consistent() {
    let (dir, stats, _) = build();
    let nodes = read_all(&dir.path().join(NODES_FILE));
    let mut out_sum = 0;
    let mut in_sum = 0;
    let mut prev_out_end = 0;
    let mut prev_in_end = 0;
    for b in &nodes {
        let col = |n: &str| b[n].as_any().downcast_ref::<UInt64Array>().unwrap().clone();
        let (os, oe, is, ie) = (
            col("out_start"),
            col("out_end"),
            col("in_start"),
            col("in_end"),
        );
        for r in 0..b.num_rows() {
            assert_eq!(os.value(r), prev_out_end);
            assert_eq!(is.value(r), prev_in_end);
            out_sum += oe.value(r) - os.value(r);
            in_sum += ie.value(r) - is.value(r);
            prev_out_end = oe.value(r);
            prev_in_end = ie.value(r);
        }
    }
    assert_eq!(out_sum, stats.edges);
    assert_eq!(in_sum, stats.edges);
    for f in [EDGES_BY_SUBJECT_FILE, EDGES_BY_OBJECT_FILE] {
        let rows: usize = read_all(&dir.path().join(f))
            .iter()
            .map(|b| b.num_rows())
            .sum();
        assert_eq!(rows as u64, stats.edges, "{f}");
    }
    // Every node's out and in edges, read by range, add up to every edge once.
    let idx = KgIndex::open(dir.path()).unwrap();
    let mut outs = 0;
    let mut ins = 0;
    for i in 0..idx.len() {
        let r = idx.out_range[i];
        outs += idx
            .read_range(EDGES_BY_SUBJECT_FILE, "subject", i, r)
            .unwrap()
            .len();
        let r = idx.in_range[i];
        ins += idx
            .read_range(EDGES_BY_OBJECT_FILE, "object", i, r)
            .unwrap()
            .len();
    }
    assert_eq!(outs as u64, stats.edges);
    assert_eq!(ins as u64, stats.edges);
}

#[test]
fn kg_graphml_is_escaped() {
    let (dir, stats, _) = build();
    let xml = std::fs::read_to_string(dir.path().join(GRAPHML_FILE)).unwrap();
    assert!(xml.contains("<data key=\"d1\">Tom &amp; Jerry &lt;Movie&gt;</data>"));
    assert!(xml.contains("Joe &quot;Hanna&quot;"));
    assert!(!xml.contains("Tom & Jerry"));
    assert!(xml.contains("edgedefault=\"directed\""));
    assert_eq!(xml.matches("<node ").count() as u64, stats.nodes);
    assert_eq!(xml.matches("<edge ").count() as u64, stats.edges);
    assert!(xml.trim_end().ends_with("</graphml>"));
    let mut out = Vec::new();
    xml_escape(&mut out, "a\u{1}b\rc\td'").unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "a\u{FFFD}b&#13;c\td&apos;");
}

#[test]
fn kg_empty_and_bad_kind() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("new/kg");
    let (stats, files) = write(&sub, Vec::new()).unwrap();
    assert_eq!(stats, KgStats::default());
    assert_eq!(files.len(), 5);
    let idx = KgIndex::open(&sub).unwrap();
    assert_eq!(Adjacency::open(&sub).unwrap().nodes(), 0);
    assert!(idx.is_empty());
    assert!(idx.node("x").is_none());
    assert!(idx.out_edges("x").unwrap().is_empty());

    let bad = vec![edge("a", "r", "b", "blank", None, None, "x")];
    let err = write(dir.path(), bad).unwrap_err();
    assert!(err.to_string().contains("object_kind"), "{err}");

    let missing = KgIndex::open(&dir.path().join("absent")).unwrap_err();
    assert!(missing.to_string().contains(NODES_FILE), "{missing}");
}

#[test]
fn kg_range_reads_across_pages() {
    // Enough edges for several batches and pages: node "hub" has edges in the middle.
    let dir = tempfile::tempdir().unwrap();
    let mut edges = Vec::new();
    for i in 0..70_000u32 {
        edges.push(edge(
            &format!("s{:06}", i),
            "r",
            &format!("o{:03}", i % 500),
            "entity",
            None,
            None,
            "synthetic",
        ));
    }
    for i in 0..3000u32 {
        edges.push(edge(
            "s035000x",
            "links",
            &format!("o{:03}", i % 500),
            "entity",
            None,
            None,
            &format!("src{}", i / 500),
        ));
    }
    let (stats, _) = write(dir.path(), edges).unwrap();
    assert_eq!(stats.duplicates, 0);
    let idx = KgIndex::open(dir.path()).unwrap();
    let out = idx.out_edges("s035000x").unwrap();
    assert_eq!(out.len(), 3000);
    assert!(
        out.iter()
            .all(|h| h.subject == "s035000x" && h.relation == "links")
    );
    assert!(
        out.windows(2)
            .all(|w| (&w[0].object, &w[0].source) < (&w[1].object, &w[1].source))
    );
    let into = idx.in_edges("o042").unwrap();
    assert_eq!(into.len(), 140 + 6);
    assert_eq!(
        idx.out_edges("s069999").unwrap(),
        vec![hit("s069999", "r", "o499", "synthetic")]
    );
}

/// A graph of `n` edges with duplicates, literals, names given in varying order and
/// several sources, its keys in no particular order.
fn shuffled_graph(n: u32) -> Vec<KgEdge> {
    (0..n)
        .map(|i| {
            let h = i.wrapping_mul(2_654_435_761);
            let s = format!("m.{:x}", h % 9_973);
            let o = format!("m.{:x}", (h >> 7) % 9_973);
            let (kind, o) = match i % 7 {
                0 => ("literal", format!("{}", h % 300)),
                _ => ("entity", o),
            };
            let name = (i % 3 == 0).then(|| format!("name {}", h % 5));
            edge(
                &s,
                &format!("rel.{}", h % 13),
                &o,
                kind,
                name.as_deref(),
                None,
                if i % 11 == 0 { "wikidata" } else { "freebase" },
            )
        })
        .chain((0..n / 10).map(|i| {
            let h = i.wrapping_mul(2_654_435_761);
            edge(
                &format!("m.{:x}", h % 9_973),
                &format!("rel.{}", h % 13),
                &format!("m.{:x}", (h >> 7) % 9_973),
                "entity",
                None,
                None,
                "freebase",
            )
        }))
        .collect()
}

#[test]
fn kg_spilling_build_equals_in_memory_build() {
    // 220,000 input rows of about 60 bytes do not fit the 8 MiB budget: the sorts spill.
    let edges = shuffled_graph(200_000);
    let roomy = tempfile::tempdir().unwrap();
    let tight = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Aliases of every 11th edge's subject, some given twice.
    let aliases: Vec<(String, String)> = edges
        .iter()
        .step_by(11)
        .map(|e| (e.subject.clone(), format!("aka {}", e.object.len() % 3)))
        .collect();
    let run = |dir: &Path, memory: usize| {
        let mut b = KgBuilder::new(dir, memory).unwrap();
        for e in edges.clone() {
            b.push(e).unwrap();
        }
        for (key, alias) in &aliases {
            b.alias(key, alias).unwrap();
        }
        rt.block_on(b.finish()).unwrap()
    };
    let (a, files) = run(roomy.path(), SORT_MEMORY);
    let (b, _) = run(tight.path(), 8 << 20);
    assert_eq!(a, b);
    for f in &files {
        let (x, y) = (
            std::fs::read(roomy.path().join(f)).unwrap(),
            std::fs::read(tight.path().join(f)).unwrap(),
        );
        assert!(x == y, "{f} differs between budgets");
    }
    assert!(!tight.path().join("_work").exists());

    // Against a model of the index: distinct nodes, distinct edges, smallest names.
    let mut nodes = std::collections::BTreeMap::<(String, String), Option<String>>::new();
    let mut distinct = std::collections::BTreeSet::new();
    for e in &edges {
        for (key, kind, name) in [
            (&e.subject, "entity", &e.subject_name),
            (&e.object, e.object_kind.as_str(), &e.object_name),
        ] {
            let slot = nodes.entry((key.clone(), kind.to_string())).or_default();
            if let Some(n) = name
                && slot.as_ref().is_none_or(|s| n < s)
            {
                *slot = Some(n.clone());
            }
        }
        distinct.insert((
            &e.subject,
            &e.relation,
            &e.object,
            &e.object_kind,
            &e.source,
        ));
    }
    assert_eq!(a.nodes, nodes.len() as u64);
    assert_eq!(a.edges, distinct.len() as u64);
    assert_eq!(a.duplicates, edges.len() as u64 - a.edges);
    assert_eq!(
        a.literals,
        nodes.keys().filter(|k| k.1 == "literal").count() as u64
    );
    let mut akas = std::collections::BTreeMap::<&str, std::collections::BTreeSet<&str>>::new();
    for (key, alias) in &aliases {
        akas.entry(key).or_default().insert(alias);
    }
    let idx = KgIndex::open(roomy.path()).unwrap();
    let mut with_aliases = 0;
    for (id, ((key, kind), name)) in nodes.iter().enumerate().step_by(97) {
        if kind != "entity" {
            continue;
        }
        let n = idx.node(key).unwrap();
        assert_eq!((n.id as usize, &n.name), (id, name), "{key}");
        let want: Vec<&str> = akas
            .get(key.as_str())
            .into_iter()
            .flatten()
            .copied()
            .collect();
        assert_eq!(n.aliases, want, "{key}");
        with_aliases += usize::from(!want.is_empty());
        let want: Vec<KgHit> = distinct
            .iter()
            .filter(|e| e.0 == key)
            .map(|e| hit(e.0, e.1, e.2, e.4))
            .collect();
        let mut got = idx.out_edges(key).unwrap();
        got.sort_by(|x, y| {
            (&x.relation, &x.object, &x.source).cmp(&(&y.relation, &y.object, &y.source))
        });
        let mut want = want;
        want.sort_by(|x, y| {
            (&x.relation, &x.object, &x.source).cmp(&(&y.relation, &y.object, &y.source))
        });
        assert_eq!(got, want, "{key}");
    }
    assert!(with_aliases > 10, "{with_aliases}");
}

#[test]
fn kg_names_apart_from_edges_and_cvt_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut b = KgBuilder::new(dir.path(), SORT_MEMORY).unwrap();
    for e in freebase() {
        b.push(e).unwrap();
    }
    // m.03 is a mediator: named by nothing. m.04 gets its name from a name row only.
    for (s, o) in [("m.01", "m.03"), ("m.03", "m.04")] {
        b.push(edge(
            s,
            "film.performance",
            o,
            "entity",
            None,
            None,
            "freebase",
        ))
        .unwrap();
    }
    b.name("m.04", "Dee").unwrap();
    b.name("m.02", "Zed").unwrap();
    // A name of a node no edge has makes no node.
    b.name("m.99", "Ghost").unwrap();
    b.name("m.98", "").unwrap();
    // Aliases: distinct, in byte order; an alias alone makes no node either.
    for (key, alias) in [
        ("m.04", "Dee Dee"),
        ("m.04", "D"),
        ("m.04", "Dee Dee"),
        ("m.97", "X"),
    ] {
        b.alias(key, alias).unwrap();
    }
    let (stats, _) = rt.block_on(b.finish()).unwrap();
    let idx = KgIndex::open(dir.path()).unwrap();
    assert!(idx.node("m.99").is_none() && idx.node("m.97").is_none());
    assert_eq!(idx.node("m.04").unwrap().name.as_deref(), Some("Dee"));
    assert_eq!(idx.node("m.04").unwrap().aliases, ["D", "Dee Dee"]);
    assert!(idx.node("m.02").unwrap().aliases.is_empty());
    assert!(!idx.node("m.04").unwrap().cvt);
    // The smallest of the names edges and name rows give.
    assert_eq!(
        idx.node("m.02").unwrap().name.as_deref(),
        Some("Joe \"Hanna\"")
    );
    let m03 = idx.node("m.03").unwrap();
    assert!(m03.cvt && m03.name.is_none(), "{m03:?}");
    // Literals and IRIs are never CVTs.
    assert!(!idx.node("1975").unwrap().cvt);
    assert_eq!(stats.cvt, 1);
    let nodes = read_all(&dir.path().join(NODES_FILE));
    let marked: usize = nodes
        .iter()
        .map(|b| {
            b.column_by_name("cvt")
                .unwrap()
                .as_any()
                .downcast_ref::<arrow::array::BooleanArray>()
                .unwrap()
                .true_count()
        })
        .sum();
    assert_eq!(marked, 1);
    let xml = std::fs::read_to_string(dir.path().join(GRAPHML_FILE)).unwrap();
    assert_eq!(xml.matches("<data key=\"d5\">true</data>").count(), 1);
    assert_eq!(
        xml.matches("<data key=\"d6\">[&quot;D&quot;,&quot;Dee Dee&quot;]</data>")
            .count(),
        1
    );
    assert!(xml.contains("attr.name=\"cvt\""));
}

/// Every node's record and edges in `adjacency.bin` equal what [`KgIndex`] reads from the
/// Parquet tables.
fn assert_adjacency_matches(dir: &Path) {
    let idx = KgIndex::open(dir).unwrap();
    let adj = Adjacency::open(dir).unwrap();
    assert_eq!(adj.nodes(), idx.len() as u64);
    let ids: Vec<u32> = (0..idx.len() as u32).collect();
    let mut seen = 0;
    adj.records(&ids, |id, r| {
        let i = id as usize;
        assert_eq!(r.key, idx.keys[i]);
        assert_eq!(r.kind, idx.kinds[i].as_str());
        assert_eq!(r.name, idx.names[i].as_deref());
        seen += 1;
    })
    .unwrap();
    assert_eq!(seen, idx.len());
    let mut scanned = Vec::new();
    adj.scan(|id, r| scanned.push((id, r.key.to_owned())))
        .unwrap();
    assert_eq!(scanned.len(), idx.len());
    assert!(scanned.iter().all(|(id, k)| *k == idx.keys[*id as usize]));
    // Lookups by key and by first byte agree with the sorted keys.
    for (i, key) in idx.keys.iter().enumerate() {
        let mut ids = Vec::new();
        adj.with_key(key, |id, r| {
            assert_eq!(r.key, key);
            ids.push(id as usize);
        })
        .unwrap();
        let want: Vec<usize> = (0..idx.len()).filter(|&j| idx.keys[j] == *key).collect();
        assert_eq!(ids, want, "node {i}");
    }
    let mut none = 0;
    adj.with_key("no such key", |_, _| none += 1).unwrap();
    assert_eq!(none, 0);
    for first in [b'/', b'm', b'K', b'1', b'z'] {
        let want: Vec<u32> = (0..idx.len() as u32)
            .filter(|&j| idx.keys[j as usize].as_bytes().first() == Some(&first))
            .collect();
        let got: Vec<u32> = adj.starting_with(first).unwrap().collect();
        assert_eq!(got, want, "keys starting with {}", first as char);
    }
    let hits = |direction, ids: &[u32]| -> Vec<KgHit> {
        let labels = adj.labels();
        adj.edges(direction, ids)
            .unwrap()
            .into_iter()
            .map(|(node, other, label)| {
                let (relation, source) = &labels[label as usize];
                let (s, o) = match direction {
                    adjacency::Direction::Out => (node, other),
                    adjacency::Direction::In => (other, node),
                };
                hit(
                    &idx.keys[s as usize],
                    relation,
                    &idx.keys[o as usize],
                    source,
                )
            })
            .collect()
    };
    // Asked one node at a time and all at once.
    let mut all_out = Vec::new();
    let mut all_in = Vec::new();
    for i in 0..idx.len() {
        let out = idx.read_range(EDGES_BY_SUBJECT_FILE, "subject", i, idx.out_range[i]);
        let inn = idx.read_range(EDGES_BY_OBJECT_FILE, "object", i, idx.in_range[i]);
        let (out, inn) = (out.unwrap(), inn.unwrap());
        assert_eq!(
            hits(adjacency::Direction::Out, &[i as u32]),
            out,
            "node {i}"
        );
        assert_eq!(hits(adjacency::Direction::In, &[i as u32]), inn, "node {i}");
        all_out.extend(out);
        all_in.extend(inn);
    }
    assert_eq!(hits(adjacency::Direction::Out, &ids), all_out);
    assert_eq!(hits(adjacency::Direction::In, &ids), all_in);
}

#[test]
fn adjacency_equals_the_parquet_tables() {
    let (dir, _, _) = build();
    assert_adjacency_matches(dir.path());
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), shuffled_graph(30_000)).unwrap();
    assert_adjacency_matches(dir.path());
}

#[test]
fn adjacency_errors_name_the_file_and_the_fault() {
    let (dir, _, _) = build();
    let path = dir.path().join(ADJACENCY_FILE);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let err = Adjacency::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(ADJACENCY_FILE) && err.contains("outside"),
        "{err}"
    );
    std::fs::write(&path, vec![b'x'; 200]).unwrap();
    let err = Adjacency::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("bad magic"), "{err}");
    std::fs::remove_file(&path).unwrap();
    let err = Adjacency::open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("rebuild the index"), "{err}");
    // An edge naming a node past the table.
    let mut bad = bytes.clone();
    let out_edges = u64::from_le_bytes(bad[56..64].try_into().unwrap()) as usize;
    bad[out_edges..out_edges + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&path, &bad).unwrap();
    let adj = Adjacency::open(dir.path()).unwrap();
    let all: Vec<u32> = (0..adj.nodes() as u32).collect();
    let err = adj.edges(adjacency::Direction::Out, &all).unwrap_err();
    assert!(err.to_string().contains("past the index"), "{err}");
}
