//! Integration tests of the HSEQ crate: round trips on generated sources (proptest), the
//! equivalence relation, the verifier, the canonicalizer κ and golden encodings.

use distillery_core::id::{sha1_hex, stable_id};
use distillery_core::{
    Document, Paragraph, Section, Segment, Sentence, Table, Triple, char_len, char_slice,
};
use distillery_hseq::HseqOptions;
use distillery_hseq::*;
use proptest::prelude::*;
use std::collections::HashSet;

// ---------------------------------------------------------------- helpers

fn opts(sections: bool, cells: bool) -> HseqOptions {
    HseqOptions {
        cells,
        sections,
        verify: true,
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Structural invariants every encoder output must satisfy.
fn assert_stream_invariants(segs: &[Segment]) {
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, s) in segs.iter().enumerate() {
        assert!(seen.insert(&s.id), "duplicate id {} at {i}", s.id);
        if let Some(p) = &s.parent {
            assert!(
                seen.contains(p.as_str()),
                "parent {p} of {} not before it",
                s.id
            );
        }
        assert_eq!(s.sha1, sha1_hex(&s.content), "sha1 of {}", s.id);
        assert_eq!(s.offsets.len(), 2);
        assert!(!s.source_type.is_empty());
        assert_ne!(level_rank(&s.level), u8::MAX, "unknown level {}", s.level);
    }
    // Each source's segments come in ρ order, `ord` numbering them from 0 (a KG shard
    // interleaves sources: one subject run after another).
    let mut sources: Vec<&str> = segs.iter().map(|s| s.source_id.as_str()).collect();
    sources.dedup();
    for src in sources {
        let group: Vec<Segment> = segs
            .iter()
            .filter(|s| s.source_id == src)
            .cloned()
            .collect();
        let mut sorted = group.clone();
        sort_stream(&mut sorted);
        assert_eq!(sorted, group, "source {src} is not in stream order");
        let ords: Vec<u32> = group.iter().map(|s| s.ord).collect();
        assert_eq!(ords, (0..group.len() as u32).collect::<Vec<_>>());
    }
}

/// T1 and per-source ord for a document's segments.
fn assert_text_invariants(doc: &Document, segs: &[Segment]) {
    assert_stream_invariants(segs);
    assert_eq!(segs[0].level, level::DOCUMENT);
    assert_eq!(segs[0].offsets, vec![0, i64::from(char_len(&doc.text))]);
    for (i, s) in segs.iter().enumerate() {
        assert_eq!(s.ord as usize, i);
        assert_eq!(s.source_id, doc.id);
        assert_eq!(s.uri, doc.uri);
        assert_eq!(s.source_type, "text");
        if i > 0 {
            let (a, b) = (s.offsets[0] as u32, s.offsets[1] as u32);
            assert_eq!(
                Some(s.content.as_str()),
                char_slice(&doc.text, a, b),
                "T1 for {s:?}"
            );
        }
    }
}

fn count_level(segs: &[Segment], lvl: &str) -> usize {
    segs.iter().filter(|s| s.level == lvl).count()
}

// ---------------------------------------------------------------- generators

const ALPHABET: &[char] = &[
    'a', 'b', 'Z', 'é', '漢', '🎉', 'ß', 'ж', '0', '.', '"', '\\', '=',
];

fn word() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ALPHABET), 1..6)
        .prop_map(|v| v.into_iter().collect())
}

fn inner_ws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![" ", "  ", "\t", "\u{a0}", "\u{3000}"])
}

fn sentence() -> impl Strategy<Value = String> {
    prop::collection::vec((word(), inner_ws()), 1..5).prop_map(|ws| {
        let mut s = String::new();
        for (i, (w, sep)) in ws.iter().enumerate() {
            if i > 0 {
                s.push_str(sep);
            }
            s.push_str(w);
        }
        s
    })
}

#[derive(Debug, Clone)]
enum Block {
    Heading(u32, String),
    Para(Vec<String>),
    /// Text outside every paragraph, optionally with a sentence span of its own.
    Orphan(String, bool),
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        1 => (2u32..4, word()).prop_map(|(l, w)| Block::Heading(l, w)),
        3 => prop::collection::vec(sentence(), 0..4).prop_map(Block::Para),
        1 => (sentence(), any::<bool>()).prop_map(|(s, b)| Block::Orphan(s, b)),
    ]
}

fn block_sep() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["\n", "\n\n", " \n \t\n", "\u{3000}\n", " "])
}

struct DocPlan {
    title: String,
    lead: &'static str,
    blocks: Vec<Block>,
    seps: Vec<&'static str>,
    with_sections: bool,
    with_sentences: bool,
    trail: &'static str,
}

fn build_doc(p: DocPlan) -> Document {
    let mut text = String::new();
    let mut n = 0u32;
    let mut push = |s: &str| {
        let a = n;
        text.push_str(s);
        n += char_len(s);
        (a, n)
    };
    push(p.lead);
    let mut sections = vec![Section {
        title: String::new(),
        level: 1,
        start: 0,
        end: 0,
    }];
    let mut cur_section = 0i32;
    let mut paragraphs = Vec::new();
    let mut sentences = Vec::new();
    for (i, b) in p.blocks.iter().enumerate() {
        if i > 0 {
            push(p.seps[i % p.seps.len()]);
        }
        match b {
            Block::Heading(l, w) => {
                let eq = "=".repeat(*l as usize);
                let (a, _) = push(&format!("{eq} {w} {eq}"));
                sections.push(Section {
                    title: w.clone(),
                    level: *l,
                    start: a,
                    end: 0,
                });
                cur_section = sections.len() as i32 - 1;
            }
            Block::Para(sents) => {
                let start = push("").0;
                let mut spans = Vec::new();
                for (k, s) in sents.iter().enumerate() {
                    if k > 0 {
                        push(" ");
                    }
                    spans.push(push(s));
                }
                let end = push("").0;
                paragraphs.push(Paragraph {
                    start,
                    end,
                    section: cur_section,
                });
                if p.with_sentences {
                    for (a, b) in spans {
                        sentences.push(Sentence {
                            start: a,
                            end: b,
                            paragraph: paragraphs.len() as i32 - 1,
                        });
                    }
                }
            }
            Block::Orphan(s, has_sentence) => {
                let (a, b) = push(s);
                if *has_sentence && p.with_sentences {
                    sentences.push(Sentence {
                        start: a,
                        end: b,
                        paragraph: -1,
                    });
                }
            }
        }
    }
    push(p.trail);
    for i in 0..sections.len() {
        let lvl = sections[i].level;
        sections[i].end = sections[i + 1..]
            .iter()
            .find(|s| i == 0 || s.level <= lvl)
            .map_or(n, |s| s.start);
    }
    if !p.with_sections {
        sections.clear();
        for para in &mut paragraphs {
            para.section = -1;
        }
    }
    Document {
        id: stable_id(&["test", &text]),
        dataset: "test".into(),
        source: "gen.xml".into(),
        uri: format!("test:{}", p.title),
        title: p.title,
        revision_id: Some(42),
        text,
        sections,
        paragraphs,
        sentences,
        ..Default::default()
    }
}

fn document() -> impl Strategy<Value = Document> {
    (
        prop_oneof![Just(String::new()), word()],
        prop::sample::select(vec!["", " ", "\n", "\u{3000}\n"]),
        prop::collection::vec(block(), 0..9),
        prop::collection::vec(block_sep(), 1..5),
        any::<bool>(),
        any::<bool>(),
        prop::sample::select(vec!["", "\n", " \n"]),
    )
        .prop_map(
            |(title, lead, blocks, seps, with_sections, with_sentences, trail)| {
                build_doc(DocPlan {
                    title,
                    lead,
                    blocks,
                    seps,
                    with_sections,
                    with_sentences,
                    trail,
                })
            },
        )
}

fn header_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "Name",
        "Name",
        "",
        " ",
        "col_2",
        "Année",
        "x\"y",
        "a\\b",
        "col_1 (2)",
        "Name (2)",
    ])
    .prop_map(String::from)
}

/// (header, rows, a column permutation).
fn table_parts() -> impl Strategy<Value = (Vec<String>, Vec<Vec<String>>, Vec<usize>)> {
    (0usize..5).prop_flat_map(|w| {
        (
            prop::collection::vec(header_name(), w),
            prop::collection::vec(prop::collection::vec("[a-zé漢\" \\\\{}:,]{0,5}", w), 0..5),
            Just((0..w).collect::<Vec<usize>>()).prop_shuffle(),
        )
    })
}

fn make_table(header: Vec<String>, rows: Vec<Vec<String>>) -> Table {
    Table {
        id: stable_id(&["t", &header.join("|"), &format!("{rows:?}")]),
        dataset: "test".into(),
        source: "tables.json".into(),
        uri: "test:table".into(),
        title: "T".into(),
        caption: Some("cap".into()),
        header,
        rows,
        ..Default::default()
    }
}

fn permute(
    header: &[String],
    rows: &[Vec<String>],
    pi: &[usize],
) -> (Vec<String>, Vec<Vec<String>>) {
    let h = pi.iter().map(|&j| header[j].clone()).collect();
    let r = rows
        .iter()
        .map(|row| pi.iter().map(|&j| row[j].clone()).collect())
        .collect();
    (h, r)
}

const SUBJECTS: [&str; 3] = ["Q1", "Q2", "m.0x"];
const PREDICATES: [&str; 3] = ["P31", "P69", "name"];
const SOURCES: [&str; 2] = ["a.nt", "b.nt"];

type EdgePlan = (
    usize,
    usize,
    usize,
    bool,
    usize,
    Option<&'static str>,
    usize,
);

fn triple_of(p: &EdgePlan) -> Triple {
    let &(s, pr, o, named, variant, time, src) = p;
    let subject = SUBJECTS[s].to_string();
    let literal = o == 3;
    let object = if literal {
        "Ünïcode \"lit\" \\ x".to_string()
    } else {
        SUBJECTS[o].to_string()
    };
    let (lang, datatype) = match (literal, variant) {
        (true, 1) => (Some("en".to_string()), None),
        (true, 2) => (None, Some("xsd:string".to_string())),
        _ => (None, None),
    };
    let source = SOURCES[src].to_string();
    Triple {
        id: stable_id(&[
            "kg",
            &source,
            &subject,
            PREDICATES[pr],
            &object,
            lang.as_deref().unwrap_or(""),
            datatype.as_deref().unwrap_or(""),
        ]),
        dataset: "kg".into(),
        source,
        subject_name: named.then(|| format!("Name of {subject}")),
        object_name: (named && !literal).then(|| format!("Name of {object}")),
        subject,
        predicate: PREDICATES[pr].into(),
        object,
        object_kind: if literal { "literal" } else { "entity" }.into(),
        lang,
        datatype,
        time: time.map(String::from),
        ..Default::default()
    }
}

fn triples() -> impl Strategy<Value = Vec<Triple>> {
    (
        prop::collection::vec(
            (
                0usize..3,
                0usize..3,
                0usize..4,
                any::<bool>(),
                0usize..3,
                prop::option::of(prop::sample::select(vec!["2001", "2020-01-01"])),
                0usize..2,
            ),
            0..25,
        ),
        prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 0..4),
        any::<bool>(),
    )
        .prop_map(|(plans, dups, with_lines)| {
            let mut ts: Vec<Triple> = plans.iter().map(triple_of).collect();
            for (ix, adjacent) in dups {
                if ts.is_empty() {
                    break;
                }
                let i = ix.index(ts.len());
                let t = ts[i].clone();
                if adjacent {
                    ts.insert(i + 1, t);
                } else {
                    ts.push(t);
                }
            }
            if with_lines {
                for (i, t) in ts.iter_mut().enumerate() {
                    t.line = Some(i as u64 + 1);
                }
            }
            ts
        })
}

fn runs(ts: &[Triple]) -> usize {
    (0..ts.len())
        .filter(|&i| {
            i == 0 || ts[i].subject != ts[i - 1].subject || ts[i].source != ts[i - 1].source
        })
        .count()
}

// ---------------------------------------------------------------- round-trip properties

proptest! {
    // No regression files: this tree is shared, and failures print their minimal input.
    #![proptest_config(ProptestConfig {
        cases: 160,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn document_round_trips(doc in document(), sections in any::<bool>()) {
        let o = opts(sections, false);
        let segs = encode_document(&doc, &o);
        assert_text_invariants(&doc, &segs);
        prop_assert_eq!(&segs, &encode_document(&doc, &o), "not deterministic");

        let back = decode_document(&segs).unwrap();
        prop_assert!(text_equivalent(&back.text, &doc.text), "{:?} vs {:?}", back.text, doc.text);
        prop_assert_eq!(char_len(&back.text), char_len(&doc.text));
        prop_assert_eq!(&back.title, &doc.title);
        prop_assert_eq!(&back.source_id, &doc.id);

        // One segment per source paragraph / sentence / section.
        let gaps = segs.iter().filter(|s| s.schema == vec![GAP.to_string()]).count();
        prop_assert_eq!(count_level(&segs, level::PARAGRAPH) - gaps, doc.paragraphs.len());
        prop_assert_eq!(count_level(&segs, level::SENTENCE), doc.sentences.len());
        let want_sections = if sections { doc.sections.len() } else { 0 };
        prop_assert_eq!(count_level(&segs, level::SECTION), want_sections);
        prop_assert_eq!(count_level(&segs, level::DOCUMENT), 1);

        // The paragraph layer alone covers every non-whitespace char.
        let mut covered = vec![false; char_len(&doc.text) as usize];
        for s in segs.iter().filter(|s| s.level == level::PARAGRAPH) {
            for k in s.offsets[0]..s.offsets[1] {
                covered[k as usize] = true;
            }
        }
        for (k, c) in doc.text.chars().enumerate() {
            prop_assert!(covered[k] || c.is_whitespace(), "char {k} {c:?} uncovered");
        }

        // Parent chain: sentences under paragraphs when they lie in one.
        for s in segs.iter().filter(|s| s.level == level::SENTENCE) {
            let p = segs.iter().find(|p| Some(&p.id) == s.parent.as_ref()).unwrap();
            prop_assert!(p.offsets[0] <= s.offsets[0] && s.offsets[1] <= p.offsets[1]);
        }

        let mut v = Verifier::new();
        v.verify_document(&doc, &segs).unwrap();
        prop_assert_eq!(v.counts().documents_ok, 1);
    }

    #[test]
    fn table_round_trips((header, rows, pi) in table_parts(), cells in any::<bool>()) {
        let t = make_table(header.clone(), rows.clone());
        let o = opts(true, cells);
        let segs = encode_table(&t, &o);
        assert_stream_invariants(&segs);
        prop_assert_eq!(&segs[0].schema, &t.header);
        prop_assert_eq!(count_level(&segs, level::TABLE_ROW), rows.len());
        let want_cells = if cells { rows.iter().map(Vec::len).sum() } else { 0 };
        prop_assert_eq!(count_level(&segs, level::TABLE_CELL), want_cells);
        for (i, s) in segs.iter().filter(|s| s.level == level::TABLE_ROW).enumerate() {
            prop_assert_eq!(&s.offsets, &vec![i as i64, -1]);
        }

        let back = decode_table(&segs).unwrap();
        // Stronger than ≡: the exact header and rows come back.
        prop_assert_eq!(&back.header, &header);
        prop_assert_eq!(&back.rows, &rows);
        prop_assert!(table_equivalent(&back.header, &back.rows, &header, &rows));
        check_table(&t, &segs).unwrap();

        // A global column permutation is benign.
        let (ph, prows) = permute(&header, &rows, &pi);
        prop_assert!(table_equivalent(&back.header, &back.rows, &ph, &prows));
        let pt = make_table(ph, prows);
        let mut pt_same_id = pt.clone();
        pt_same_id.id = t.id.clone();
        check_table(&pt_same_id, &segs).unwrap();
    }

    #[test]
    fn kg_round_trips(ts in triples()) {
        let segs = encode_kg(&ts);
        assert_stream_invariants(&segs);
        prop_assert_eq!(count_level(&segs, level::TRIPLET), ts.len());
        prop_assert_eq!(count_level(&segs, level::SUBGRAPH), runs(&ts));
        for s in &segs {
            prop_assert_eq!(&s.offsets, &vec![-1, -1]);
            prop_assert_eq!(&s.source_type, "kg");
            if s.level == level::TRIPLET {
                prop_assert_eq!(s.source_id.as_str(), s.parent.as_deref().unwrap());
                prop_assert_eq!(&s.schema[..3], &TRIPLET_SCHEMA[..]);
            }
        }

        // Streaming gives the same segments.
        let mut enc = KgEncoder::new();
        let streamed: Vec<Segment> = ts.iter().flat_map(|t| enc.push(t)).collect();
        prop_assert_eq!(&streamed, &segs);
        prop_assert_eq!(enc.triplets(), ts.len() as u64);

        let edges = decode_kg(&segs).unwrap();
        let want: Vec<KgEdge> = ts.iter().map(KgEdge::from_triple).collect();
        prop_assert_eq!(&edges, &want, "decoding keeps edges in order");
        let mut reversed = want.clone();
        reversed.reverse();
        prop_assert!(kg_equivalent(&edges, &reversed));

        let mut v = Verifier::new();
        let st = v.verify_kg(&ts, &segs).unwrap();
        prop_assert_eq!(st.edges, ts.len() as u64);
        prop_assert_eq!(v.counts().subgraphs_ok, runs(&ts) as u64);
    }

    #[test]
    fn changed_char_is_not_equivalent(text in "[a-zé漢 \n]{1,40}", at in any::<prop::sample::Index>()) {
        let chars: Vec<char> = text.chars().collect();
        let non_ws: Vec<usize> = (0..chars.len()).filter(|&i| !chars[i].is_whitespace()).collect();
        prop_assume!(!non_ws.is_empty());
        let i = non_ws[at.index(non_ws.len())];
        let mut changed = chars.clone();
        changed[i] = if chars[i] == 'x' { 'y' } else { 'x' };
        let changed: String = changed.into_iter().collect();
        prop_assert!(!text_equivalent(&text, &changed));
        // Whitespace edits are benign.
        let spaced: String = text.split(' ').collect::<Vec<_>>().join("\u{3000} \t");
        prop_assert!(text_equivalent(&text, &spaced));
        let unwrapped = format!("\n{}\n", text.replace('\n', ""));
        prop_assert!(text_equivalent(&text, &unwrapped));
    }
}

// ---------------------------------------------------------------- text edge cases

#[test]
fn title_only_and_paragraphless_documents_round_trip() {
    for text in [
        "",
        "   \n",
        "Just some text.",
        "== H ==\n\nbody line\n  tail",
    ] {
        let doc = Document {
            id: "d".into(),
            uri: "u:d".into(),
            title: "Title only".into(),
            text: text.into(),
            ..Default::default()
        };
        let segs = encode_document(&doc, &HseqOptions::default());
        assert_text_invariants(&doc, &segs);
        assert_eq!(segs[0].content, "Title only");
        let back = decode_document(&segs).unwrap();
        assert!(text_equivalent(&back.text, text));
        check_document(&doc, &segs).unwrap();
    }
    let doc = Document {
        id: "d".into(),
        title: "T".into(),
        text: "== H ==\n\nbody line\n  tail".into(),
        ..Default::default()
    };
    let segs = encode_document(&doc, &HseqOptions::default());
    let gaps: Vec<&str> = segs[1..].iter().map(|s| s.content.as_str()).collect();
    assert_eq!(gaps, ["== H ==", "body line", "tail"]);
}

#[test]
fn out_of_range_and_duplicate_spans_are_clamped_and_kept() {
    let doc = Document {
        id: "d".into(),
        uri: "u:d".into(),
        title: "T".into(),
        text: "ab cd".into(),
        paragraphs: vec![
            Paragraph {
                start: 0,
                end: 2,
                section: 7,
            },
            Paragraph {
                start: 0,
                end: 2,
                section: -1,
            },
            Paragraph {
                start: 3,
                end: 99,
                section: -1,
            },
        ],
        sentences: vec![Sentence {
            start: 4,
            end: 2,
            paragraph: 9,
        }],
        sections: vec![Section {
            title: "x".into(),
            level: 1,
            start: 0,
            end: 100,
        }],
        ..Default::default()
    };
    let segs = encode_document(&doc, &HseqOptions::default());
    assert_text_invariants(&doc, &segs);
    let paras: Vec<(&str, &Vec<i64>)> = segs
        .iter()
        .filter(|s| s.level == level::PARAGRAPH)
        .map(|s| (s.content.as_str(), &s.offsets))
        .collect();
    assert_eq!(
        paras,
        [
            ("ab", &vec![0, 2]),
            ("ab", &vec![0, 2]),
            ("cd", &vec![3, 5])
        ]
    );
    let sent = segs.iter().find(|s| s.level == level::SENTENCE).unwrap();
    assert_eq!(sent.offsets, vec![4, 4]);
    assert_eq!(sent.content, "");
    check_document(&doc, &segs).unwrap();
}

#[test]
fn ids_differ_across_levels_for_the_same_span() {
    let doc = Document {
        id: "d".into(),
        title: "T".into(),
        text: "One.".into(),
        paragraphs: vec![Paragraph {
            start: 0,
            end: 4,
            section: 0,
        }],
        sentences: vec![Sentence {
            start: 0,
            end: 4,
            paragraph: 0,
        }],
        sections: vec![Section {
            title: String::new(),
            level: 1,
            start: 0,
            end: 4,
        }],
        ..Default::default()
    };
    let segs = encode_document(&doc, &HseqOptions::default());
    assert_eq!(segs.len(), 4);
    let ids: HashSet<&str> = segs.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), 4);
}

// ---------------------------------------------------------------- decode errors

fn golden_doc() -> Document {
    Document {
        id: "d1".into(),
        dataset: "test".into(),
        source: "golden.xml".into(),
        uri: "test:Golden".into(),
        title: "Golden".into(),
        page_id: Some(31),
        revision_id: Some(7),
        text: "Lead one. Lead two.\n\n== History ==\nOld times.\n=== Early ===\nFirst.\n".into(),
        sections: vec![
            Section {
                title: String::new(),
                level: 1,
                start: 0,
                end: 21,
            },
            Section {
                title: "History".into(),
                level: 2,
                start: 21,
                end: 67,
            },
            Section {
                title: "Early".into(),
                level: 3,
                start: 46,
                end: 67,
            },
        ],
        paragraphs: vec![
            Paragraph {
                start: 0,
                end: 19,
                section: 0,
            },
            Paragraph {
                start: 35,
                end: 45,
                section: 1,
            },
            Paragraph {
                start: 60,
                end: 66,
                section: 2,
            },
        ],
        sentences: vec![
            Sentence {
                start: 0,
                end: 9,
                paragraph: 0,
            },
            Sentence {
                start: 10,
                end: 19,
                paragraph: 0,
            },
            Sentence {
                start: 35,
                end: 45,
                paragraph: 1,
            },
            Sentence {
                start: 60,
                end: 66,
                paragraph: 2,
            },
        ],
        ..Default::default()
    }
}

fn reseal(s: &mut Segment) {
    s.sha1 = sha1_hex(&s.content);
}

#[test]
fn decoder_rejects_broken_structure() {
    let segs = encode_document(&golden_doc(), &HseqOptions::default());

    let mut swapped = segs.clone();
    swapped.swap(1, 4);
    assert!(matches!(
        decode_document(&swapped),
        Err(DecodeError::ParentAfterChild { .. })
    ));

    let mut orphan = segs.clone();
    orphan[5].parent = Some("nope".into());
    assert!(matches!(
        decode_document(&orphan),
        Err(DecodeError::MissingParent { .. })
    ));

    let mut dup = segs.clone();
    dup[6].id = dup[5].id.clone();
    assert!(matches!(
        decode_document(&dup),
        Err(DecodeError::DuplicateId { .. })
    ));

    let mut bad_hash = segs.clone();
    bad_hash[4].content = "Lead one, Lead two.".into();
    assert!(matches!(
        decode_document(&bad_hash),
        Err(DecodeError::Sha1 { .. })
    ));

    let mut conflict = segs.clone();
    conflict[4].content = "Lead one, Lead two.".into();
    reseal(&mut conflict[4]);
    assert!(matches!(
        decode_document(&conflict),
        Err(DecodeError::ContentConflict { .. })
    ));

    let mut range = segs.clone();
    range[4].offsets = vec![50, 80];
    assert!(matches!(
        decode_document(&range),
        Err(DecodeError::OutOfRange { .. })
    ));

    assert!(matches!(
        decode_document(&segs[1..]),
        Err(DecodeError::NoRoot { .. })
    ));
    assert!(matches!(decode_document(&[]), Err(DecodeError::Empty)));

    let t = golden_table();
    let tsegs = encode_table(&t, &opts(true, true));
    let mut bad_row = tsegs.clone();
    bad_row[1].content = r#"{"Nope":"x"}"#.into();
    reseal(&mut bad_row[1]);
    assert!(matches!(
        decode_table(&bad_row),
        Err(DecodeError::RowKey { .. })
    ));
    let mut missing = tsegs.clone();
    missing.retain(|s| s.offsets.first() != Some(&0));
    assert!(matches!(
        decode_table(&missing),
        Err(DecodeError::MissingRow { row: 0 })
    ));
    let mut bad_cell = tsegs.clone();
    bad_cell[4].content = "changed".into();
    reseal(&mut bad_cell[4]);
    assert!(matches!(
        decode_table(&bad_cell),
        Err(DecodeError::CellMismatch { .. })
    ));

    let ksegs = encode_kg(&golden_triples());
    let mut bad_triplet = ksegs.clone();
    bad_triplet[1].content = r#"["x","y","z"]"#.into();
    reseal(&mut bad_triplet[1]);
    assert!(matches!(
        decode_kg(&bad_triplet),
        Err(DecodeError::TripletContent { .. })
    ));
    assert!(matches!(
        decode_kg(&ksegs[1..]),
        Err(DecodeError::MissingParent { .. })
    ));
}

// ---------------------------------------------------------------- equivalence

#[test]
fn table_equivalence_positive_and_negative() {
    let h = strings(&["a", "b", "c"]);
    let rows = vec![strings(&["1", "2", "3"]), strings(&["4", "5", "6"])];
    // Global permutation: equivalent.
    let (ph, prows) = permute(&h, &rows, &[2, 0, 1]);
    assert!(table_equivalent(&h, &rows, &ph, &prows));
    assert_eq!(
        column_permutation(&h, &rows, &ph, &prows),
        Some(vec![2, 0, 1])
    );
    // A swapped pair of cells in one row only: not equivalent.
    let mut swapped = rows.clone();
    swapped[1].swap(0, 1);
    assert!(!table_equivalent(&h, &rows, &h, &swapped));
    // Header permuted without the rows: not equivalent.
    assert!(!table_equivalent(&h, &rows, &ph, &rows));
    // Row order matters.
    let reordered = vec![rows[1].clone(), rows[0].clone()];
    assert!(!table_equivalent(&h, &rows, &h, &reordered));
    // Duplicate header names: which `Name` is which is decided by the cells.
    let dh = strings(&["Name", "Name"]);
    let drows = vec![strings(&["x", "y"]), strings(&["x", "z"])];
    let swapped_cols = vec![strings(&["y", "x"]), strings(&["z", "x"])];
    assert!(table_equivalent(&dh, &drows, &dh, &swapped_cols));
    let one_row = vec![strings(&["y", "x"]), strings(&["x", "z"])];
    assert!(!table_equivalent(&dh, &drows, &dh, &one_row));
    // Shape differences.
    assert!(!table_equivalent(&h, &rows, &h, &rows[..1]));
    assert!(table_equivalent(&[], &[], &[], &[]));
}

#[test]
fn kg_equivalence_is_multiset_equality() {
    let ts = golden_triples();
    let e: Vec<KgEdge> = ts.iter().map(KgEdge::from_triple).collect();
    let mut reordered = e.clone();
    reordered.rotate_left(2);
    assert!(kg_equivalent(&e, &reordered));
    assert!(!kg_equivalent(&e, &e[1..]), "a missing edge");
    let mut changed_time = e.clone();
    changed_time[0].time = Some("1999".into());
    assert!(!kg_equivalent(&e, &changed_time));
    // Multiplicity counts: e holds one edge twice.
    let mut deduped = e.clone();
    deduped.pop();
    deduped.push(e[1].clone());
    assert!(!kg_equivalent(&e, &deduped));
    let (missing, extra) = edge_difference(&e, &e[1..]);
    assert_eq!((missing.len(), extra.len()), (1, 0));
}

// ---------------------------------------------------------------- verifier

#[test]
fn verifier_counts_failures() {
    let doc = golden_doc();
    let t = golden_table();
    let ts = golden_triples();
    let mut v = Verifier::with_max_failures(2);

    let segs = encode_document(&doc, &HseqOptions::default());
    v.verify_document(&doc, &segs).unwrap();
    // Segments of another text: decodes, but is not the source.
    let mut other = doc.clone();
    other.text = other.text.replace("Old", "New");
    let e = v.verify_document(&other, &segs).unwrap_err();
    assert!(matches!(e, Mismatch::Span { .. }), "{e}");
    // A paragraph dropped: the decoded text loses its chars.
    let mut dropped = segs.clone();
    dropped.retain(|s| !(s.level == level::SENTENCE && s.offsets[0] == 60));
    dropped.retain(|s| !(s.level == level::PARAGRAPH && s.offsets[0] == 60));
    assert!(v.verify_document(&doc, &dropped).is_err());

    let tsegs = encode_table(&t, &HseqOptions::default());
    v.verify_table(&t, &tsegs).unwrap();
    let mut t2 = t.clone();
    t2.rows[0].swap(0, 1);
    assert!(matches!(
        v.verify_table(&t2, &tsegs),
        Err(Mismatch::Table { .. })
    ));

    let ksegs = encode_kg(&ts);
    v.verify_kg(&ts, &ksegs).unwrap();
    let e = v.verify_kg(&ts, &ksegs[..ksegs.len() - 1]).unwrap_err();
    assert!(
        matches!(
            e,
            Mismatch::Edges {
                missing: 1,
                extra: 0,
                ..
            }
        ),
        "{e}"
    );

    let c = v.counts().clone();
    assert_eq!((c.documents_ok, c.documents_failed), (1, 2));
    assert_eq!((c.tables_ok, c.tables_failed), (1, 1));
    assert_eq!((c.kg_ok, c.kg_failed), (1, 1));
    assert_eq!((c.subgraphs_ok, c.edges_ok, c.edges_failed), (3, 4, 4));
    assert_eq!(c.first_failures.len(), 2);
    assert!(
        c.first_failures[0].starts_with("document d1:"),
        "{:?}",
        c.first_failures
    );
    assert_eq!((c.ok(), c.failed()), (3, 4));

    let mut total = VerifyCounts::default();
    total.merge(&c, 3);
    total.merge(&c, 3);
    assert_eq!(total.documents_failed, 4);
    assert_eq!(total.first_failures.len(), 3);
    let json = serde_json::to_value(&total).unwrap();
    assert_eq!(json["edges_ok"], 8);
}

// ---------------------------------------------------------------- canonicalizer

fn all_golden_segments() -> Vec<Segment> {
    let mut segs = encode_document(&golden_doc(), &HseqOptions::default());
    segs.extend(encode_table(&golden_table(), &opts(true, true)));
    segs.extend(encode_kg(&golden_triples()));
    segs
}

#[test]
fn canonicalizer_dedupes_orders_and_is_deterministic() {
    let segs = all_golden_segments();
    let pick = |lvl: &str, a: i64, b: i64| {
        segs.iter()
            .find(|s| s.level == lvl && s.offsets == [a, b])
            .unwrap()
            .clone()
    };
    let sentence = pick(level::SENTENCE, 35, 45);
    let paragraph = pick(level::PARAGRAPH, 35, 45);
    let row = pick(level::TABLE_ROW, 1, -1);
    let cell = pick(level::TABLE_CELL, 0, 2);
    let triplets: Vec<Segment> = segs
        .iter()
        .filter(|s| s.level == level::TRIPLET)
        .cloned()
        .collect();
    let mut selected = vec![
        triplets[0].clone(),
        paragraph.clone(),
        row.clone(),
        sentence.clone(),
        cell.clone(),
        triplets[3].clone(),
        row.clone(),
        pick(level::SENTENCE, 0, 9),
    ];
    let k = canonicalize(&selected);
    // Same (uri, offsets): sentence and paragraph merge (finest wins); the row repeated once;
    // triplets 0 and 3 are the same edge (same uri) in two runs.
    assert_eq!(k.len(), 5);
    let keys: Vec<(&str, [i64; 2])> = k.iter().map(|e| (e.uri.as_str(), e.offsets)).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "ordered by uri then offsets");
    assert_eq!(keys[0], ("test:Golden", [0, 9]));
    assert_eq!(keys[1], ("test:Golden", [35, 45]));
    assert_eq!(keys[2], ("test:table", [0, 2]));
    assert_eq!(keys[3], ("test:table", [1, -1]));
    assert!(keys[4].0.starts_with("wd:Q1#"));
    assert_eq!(keys[4].1, [-1, -1]);
    assert_eq!(k[1].level, level::SENTENCE);
    assert_eq!(k[1].meta.segment_id, sentence.id);
    assert_eq!(k[2].snippet, "1");
    assert_eq!(k[2].meta.schema, vec!["col_3"]);
    assert_eq!(k[3].source_type, "table");
    assert_eq!(k[4].source_type, "kg");
    assert_eq!(k[4].meta.time.as_deref(), Some("2001"));
    for e in &k {
        assert_eq!(e.id, evidence_id(&e.uri, e.offsets));
        assert_eq!(e.id.len(), 40);
    }
    // Independent of selection order.
    selected.reverse();
    assert_eq!(canonicalize(&selected), k);
    // JSON form.
    let json = serde_json::to_value(&k[1]).unwrap();
    for key in [
        "id",
        "level",
        "uri",
        "offsets",
        "source_type",
        "snippet",
        "meta",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["offsets"], serde_json::json!([35, 45]));
    assert_eq!(json["meta"]["source_version"], "7");
}

#[test]
fn canonicalizer_is_content_preserving_with_unlimited_snippets() {
    // Every segment of the golden sources, except the third KG run: it repeats the first
    // run's subject and edge at the same (uri, offsets) under another root (`source_id`).
    let mut selected = encode_document(&golden_doc(), &HseqOptions::default());
    selected.extend(encode_table(&golden_table(), &opts(true, true)));
    selected.extend(encode_kg(&golden_triples()[..3]));
    let full = canonicalize_with(&selected, &CanonOptions::unlimited());
    assert!(content_preserving(&selected, &full));
    assert!(full.iter().all(|e| e.content().is_some()));
    // With a small budget long contents are cut at a word boundary.
    let short = canonicalize_with(
        &selected,
        &CanonOptions {
            snippet_chars: Some(12),
        },
    );
    assert!(!content_preserving(&selected, &short));
    let sec = short
        .iter()
        .find(|e| e.level == level::SECTION && e.offsets == [21, 67])
        .unwrap();
    assert_eq!(sec.snippet, "== History…");
    assert!(sec.meta.truncated);
    assert_eq!(sec.content(), None);
    // A paragraph over the whole text replaces the document root (same place): the title is
    // not in the package, which the check reports.
    let doc = Document {
        id: "x".into(),
        uri: "u:x".into(),
        title: "X".into(),
        text: "whole".into(),
        paragraphs: vec![Paragraph {
            start: 0,
            end: 5,
            section: -1,
        }],
        ..Default::default()
    };
    let dsegs = encode_document(&doc, &HseqOptions::default());
    let k = canonicalize_with(&dsegs, &CanonOptions::unlimited());
    assert_eq!(k.len(), 1);
    assert_eq!(k[0].level, level::PARAGRAPH);
    assert!(!content_preserving(&dsegs, &k));
    assert!(content_preserving(&dsegs[1..], &k));
}

// ---------------------------------------------------------------- golden encodings

#[test]
fn golden_document() {
    let doc = golden_doc();
    let segs = encode_document(&doc, &HseqOptions::default());
    assert_text_invariants(&doc, &segs);
    // (level, parent index, offsets, content, schema)
    type Row<'a> = (&'a str, Option<usize>, [i64; 2], &'a str, &'a [&'a str]);
    let want: Vec<Row> = vec![
        ("document", None, [0, 67], "Golden", &[]),
        ("section", Some(0), [0, 21], "Lead one. Lead two.\n\n", &[]),
        (
            "section",
            Some(0),
            [21, 67],
            "== History ==\nOld times.\n=== Early ===\nFirst.\n",
            &[],
        ),
        ("section", Some(2), [46, 67], "=== Early ===\nFirst.\n", &[]),
        ("paragraph", Some(1), [0, 19], "Lead one. Lead two.", &[]),
        ("paragraph", Some(2), [21, 34], "== History ==", &["gap"]),
        ("paragraph", Some(2), [35, 45], "Old times.", &[]),
        ("paragraph", Some(3), [46, 59], "=== Early ===", &["gap"]),
        ("paragraph", Some(3), [60, 66], "First.", &[]),
        ("sentence", Some(4), [0, 9], "Lead one.", &[]),
        ("sentence", Some(4), [10, 19], "Lead two.", &[]),
        ("sentence", Some(6), [35, 45], "Old times.", &[]),
        ("sentence", Some(8), [60, 66], "First.", &[]),
    ];
    assert_eq!(segs.len(), want.len());
    for (s, (lvl, parent, offsets, content, schema)) in segs.iter().zip(&want) {
        assert_eq!(s.level, *lvl);
        assert_eq!(
            s.parent,
            parent.map(|p| segs[p].id.clone()),
            "parent of {s:?}"
        );
        assert_eq!(s.offsets, offsets.to_vec());
        assert_eq!(s.content, *content);
        assert_eq!(s.schema, strings(schema));
        assert_eq!(s.source_version.as_deref(), Some("7"));
        assert_eq!(s.page_id, Some(31), "a text segment names its page");
        assert_eq!(s.time, None);
    }
    assert_eq!(segs[0].id, stable_id(&["d1", "document", "0", "67"]));
    assert_eq!(segs[6].id, stable_id(&["d1", "paragraph", "35", "45"]));
    assert_eq!(segs[11].id, stable_id(&["d1", "sentence", "35", "45"]));

    // Without sections, paragraphs hang off the document.
    let flat = encode_document(&doc, &opts(false, false));
    assert_eq!(count_level(&flat, level::SECTION), 0);
    assert_eq!(flat.len(), 10);
    for s in flat.iter().filter(|s| s.level == level::PARAGRAPH) {
        assert_eq!(s.parent.as_ref(), Some(&flat[0].id));
    }
    let back = decode_document(&flat).unwrap();
    assert_eq!(
        back.text,
        "Lead one. Lead two.  == History == Old times. === Early === First. "
    );
    assert_eq!(back.paragraphs, vec![(0, 19), (35, 45), (60, 66)]);
    assert_eq!(back.gaps, vec![(21, 34), (46, 59)]);
}

fn golden_table() -> Table {
    Table {
        id: "t1".into(),
        dataset: "test".into(),
        source: "tables.json".into(),
        uri: "test:table".into(),
        title: "Scores".into(),
        caption: Some("Top".into()),
        header: strings(&["Name", "Name", ""]),
        rows: vec![
            strings(&["Ann", "Bo", "1"]),
            strings(&["Cy", "Di \"x\"", "2"]),
        ],
        ..Default::default()
    }
}

#[test]
fn golden_table_segments() {
    let t = golden_table();
    let segs = encode_table(&t, &opts(true, true));
    assert_stream_invariants(&segs);
    let root = &segs[0];
    assert_eq!(root.level, "table");
    assert_eq!(root.id, stable_id(&["t1", "table"]));
    assert_eq!(root.content, "Scores\nTop\nName | Name | ");
    assert_eq!(root.schema, t.header);
    assert_eq!(root.offsets, vec![-1, -1]);
    assert_eq!(root.parent, None);
    let rows: Vec<(&str, &Vec<i64>)> = segs[1..3]
        .iter()
        .map(|s| (s.content.as_str(), &s.offsets))
        .collect();
    assert_eq!(
        rows,
        [
            (
                r#"{"Name":"Ann","Name (2)":"Bo","col_3":"1"}"#,
                &vec![0, -1]
            ),
            (
                r#"{"Name":"Cy","Name (2)":"Di \"x\"","col_3":"2"}"#,
                &vec![1, -1]
            ),
        ]
    );
    assert!(
        segs[1..3]
            .iter()
            .all(|s| s.parent.as_ref() == Some(&root.id))
    );
    let cells: Vec<(&str, [i64; 2], &str, usize)> = segs[3..]
        .iter()
        .map(|s| {
            let parent = segs
                .iter()
                .position(|p| Some(&p.id) == s.parent.as_ref())
                .unwrap();
            (
                s.content.as_str(),
                [s.offsets[0], s.offsets[1]],
                s.schema[0].as_str(),
                parent,
            )
        })
        .collect();
    assert_eq!(
        cells,
        [
            ("Ann", [0, 0], "Name", 1),
            ("Bo", [0, 1], "Name (2)", 1),
            ("1", [0, 2], "col_3", 1),
            ("Cy", [1, 0], "Name", 2),
            ("Di \"x\"", [1, 1], "Name (2)", 2),
            ("2", [1, 2], "col_3", 2),
        ]
    );
    let ords: Vec<u32> = segs.iter().map(|s| s.ord).collect();
    assert_eq!(ords, (0..9).collect::<Vec<u32>>());
    let back = decode_table(&segs).unwrap();
    assert_eq!((back.header, back.rows), (t.header.clone(), t.rows.clone()));
    assert_eq!(back.summary, root.content);
    // Inside a document, the uri gets a fragment.
    let mut inner = t.clone();
    inner.document_id = Some("d1".into());
    inner.table_index = 1;
    assert_eq!(
        encode_table(&inner, &HseqOptions::default())[0].uri,
        "test:table#table=1"
    );
}

fn golden_triples() -> Vec<Triple> {
    let t = |s: &str, p: &str, o: &str, kind: &str| Triple {
        id: stable_id(&["wd", s, p, o]),
        dataset: "wd".into(),
        source: "f.json".into(),
        subject: s.into(),
        predicate: p.into(),
        object: o.into(),
        object_kind: kind.into(),
        ..Default::default()
    };
    let mut a = t("Q1", "P69", "Q2", "entity");
    a.subject_name = Some("One".into());
    a.object_name = Some("Two".into());
    a.time = Some("2001".into());
    let mut b = t("Q1", "label", "uno", "literal");
    b.lang = Some("es".into());
    let c = t("Q3", "P69", "Q1", "entity");
    vec![a.clone(), b, c, a]
}

#[test]
fn golden_kg_segments() {
    let ts = golden_triples();
    let segs = encode_kg(&ts);
    assert_stream_invariants(&segs);
    let shape: Vec<(&str, &str, Option<usize>)> = segs
        .iter()
        .map(|s| {
            let parent = segs.iter().position(|p| Some(&p.id) == s.parent.as_ref());
            (s.level.as_str(), s.content.as_str(), parent)
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("subgraph", "One (Q1)", None),
            ("triplet", r#"["One","P69","Two"]"#, Some(0)),
            ("triplet", r#"["Q1","label","uno"]"#, Some(0)),
            ("subgraph", "Q3", None),
            ("triplet", r#"["Q3","P69","Q1"]"#, Some(3)),
            ("subgraph", "One (Q1)", None),
            ("triplet", r#"["One","P69","Two"]"#, Some(5)),
        ]
    );
    // A subject in two separate runs gets two distinct roots.
    assert_ne!(segs[0].id, segs[5].id);
    assert_eq!(
        segs[0].id,
        stable_id(&["wd", "f.json", "Q1", &ts[0].id, ""])
    );
    assert_eq!(segs[0].uri, "wd:Q1");
    assert_eq!(segs[0].source_id, segs[0].id);
    let tr = &segs[2];
    assert_eq!(tr.source_id, segs[0].id);
    assert_eq!(
        tr.schema,
        strings(&[
            "subject",
            "predicate",
            "object",
            r#"{"s":"Q1","p":"label","o":"uno","k":"literal","lang":"es"}"#
        ])
    );
    assert_eq!(tr.offsets, vec![-1, -1]);
    assert_eq!(tr.ord, 2);
    assert_eq!(segs[1].time.as_deref(), Some("2001"));
    // The same edge in two runs: same uri (one place for κ), distinct ids.
    assert_eq!(segs[1].uri, segs[6].uri);
    assert_ne!(segs[1].id, segs[6].id);
    assert!(segs[1].uri.starts_with("wd:Q1#"));
    assert_eq!(decode_kg(&segs).unwrap()[1].lang.as_deref(), Some("es"));
}

#[test]
fn stream_order_over_mixed_sources() {
    let mut segs = all_golden_segments();
    segs.reverse();
    sort_stream(&mut segs);
    let ranks: Vec<u8> = segs.iter().map(|s| level_rank(&s.level)).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]));
    // paragraph ≺ row ≺ sentence ≺ triplet
    let first = |lvl: &str| segs.iter().position(|s| s.level == lvl).unwrap();
    assert!(first(level::PARAGRAPH) < first(level::TABLE_ROW));
    assert!(first(level::TABLE_ROW) < first(level::SENTENCE));
    assert!(first(level::SENTENCE) < first(level::TRIPLET));
    assert_stream_invariants(&segs);
}
