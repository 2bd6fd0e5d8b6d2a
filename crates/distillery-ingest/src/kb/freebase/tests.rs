//! Tests of the Freebase reader and its N-Triples parser.

use super::*;
use distillery_core::VecSink;
use std::borrow::Cow;
use std::io::Write;

fn parse(s: &str) -> Statement<'_> {
    parse_line(s).unwrap().unwrap()
}

#[test]
fn parses_tab_and_space_separated_lines() {
    let t = "<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Blade\"@en\t.";
    let st = parse(t);
    assert_eq!(st.subject, Term::Iri("http://rdf.freebase.com/ns/m.01"));
    assert_eq!(st.predicate, NAME_PREDICATE);
    assert_eq!(
        st.object,
        Term::Literal {
            value: "Blade",
            lang: Some("en"),
            datatype: None
        }
    );
    let s = "<http://a.example/s> <http://a.example/p> \"1\"^^<http://www.w3.org/2001/XMLSchema#int> . # c";
    let st = parse(s);
    assert_eq!(
        st.object,
        Term::Literal {
            value: "1",
            lang: None,
            datatype: Some("http://www.w3.org/2001/XMLSchema#int")
        }
    );
    // No whitespace needed between terms; blank nodes; a label before the final dot.
    let st = parse("_:b1<http://a.example/p>_:b2.");
    assert_eq!(st.subject, Term::Blank("b1"));
    assert_eq!(st.object, Term::Blank("b2"));
    assert_eq!(parse("<http://x/s> <http://x/p> \"v\"@en-GB.").object, {
        Term::Literal {
            value: "v",
            lang: Some("en-GB"),
            datatype: None,
        }
    });
}

#[test]
fn blank_and_comment_lines_are_skipped() {
    assert_eq!(parse_line(""), Ok(None));
    assert_eq!(parse_line(" \t "), Ok(None));
    assert_eq!(parse_line("# a comment"), Ok(None));
}

#[test]
fn rejects_broken_lines() {
    for bad in [
        "<http://x/s> <http://x/p> <http://x/o>",
        "<http://x/s> <http://x/p> \"unterminated .",
        "<http://x/s> <http://x/p <http://x/o> .",
        "<http://x/s> \"lit\" <http://x/o> .",
        "<relative> <http://x/p> <http://x/o> .",
        "<http://x/s> <http://x/p> <http://x/o o> .",
        "<http://x/s> <http://x/p> \"a\\qb\" .",
        "<http://x/s> <http://x/p> \"a\\u12\" .",
        "<http://x/s> <http://x/p> \"a\\uD800\" .",
        "<http://x/s> <http://x/p> \"a\"@ .",
        "<http://x/s> <http://x/p> \"a\"@en- .",
        "<http://x/s> <http://x/p> \"a\"^<http://x/t> .",
        "<http://x/s> <http://x/p> <http://x/o> . extra",
        "<http://x/s> <http://x/p> _: .",
        "\"s\" <http://x/p> <http://x/o> .",
        "<http://x/s>\t<http://x/p>\t\"a\rb\"\t.",
    ] {
        assert!(parse_line(bad).is_err(), "accepted {bad:?}");
    }
    let e = parse_line("<http://x/s> <http://x/p> <http://x/o>").unwrap_err();
    assert_eq!(e.to_string(), "expected '.' after the object at column 39");
}

#[test]
fn unescapes_strings_and_iris() {
    assert_eq!(unescape("plain"), Cow::Borrowed("plain"));
    assert_eq!(
        unescape(r#"a\"b\\c\nd\te\u00e9\U0001F600"#),
        "a\"b\\c\nd\te\u{e9}\u{1F600}"
    );
    let st = parse(r#"<http://x/s\u0041> <http://x/p> "q\"uote" ."#);
    let mut key = String::from("left over");
    key.clear();
    push_term_key(&st.subject, &mut key);
    assert_eq!(key, "http://x/sA");
}

/// The escape decoding of `unescape` done one byte at a time (its form before it skipped to
/// each backslash with `memchr`).
fn unescape_bytewise(raw: &str) -> String {
    let b = raw.as_bytes();
    let (mut out, mut i) = (String::new(), 0);
    while i < b.len() {
        if b[i] != b'\\' {
            let ch = raw[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        let hex = |d: usize| {
            u32::from_str_radix(&raw[i + 2..i + 2 + d], 16)
                .ok()
                .and_then(char::from_u32)
                .unwrap()
        };
        let (ch, n) = match b[i + 1] {
            b't' => ('\t', 2),
            b'b' => ('\u{8}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b'f' => ('\u{c}', 2),
            b'u' => (hex(4), 6),
            b'U' => (hex(8), 10),
            other => (other as char, 2),
        };
        out.push(ch);
        i += n;
    }
    out
}

#[test]
fn unescape_decodes_every_escape_wherever_it_stands() {
    let escapes = [
        r"\t",
        r"\b",
        r"\n",
        r"\r",
        r"\f",
        r#"\""#,
        r"\'",
        r"\\",
        r"\u00E9",
        r"\U0001F600",
    ];
    let texts = ["", "a", "caf\u{e9}", "The party is a long description, "];
    let mut n = 0;
    for e1 in escapes {
        for e2 in escapes {
            for t in texts {
                for raw in [
                    e1.to_string(),
                    format!("{t}{e1}"),
                    format!("{e1}{t}"),
                    format!("{t}{e1}{e2}{t}"),
                    format!("{e1}{t}{e2}"),
                    format!("{t}{e1}{t}{e2}{t}{e1}"),
                ] {
                    // Each one is a valid literal of a line, then decoded.
                    let line = format!("<http://x/s> <http://x/p> \"{raw}\"@en .");
                    let Term::Literal { value, .. } = parse(&line).object else {
                        panic!("{line}");
                    };
                    assert_eq!(unescape(value), unescape_bytewise(&raw), "{raw:?}");
                    n += 1;
                }
            }
        }
    }
    assert_eq!(n, 10 * 10 * 4 * 6);
    for plain in texts {
        assert!(matches!(unescape(plain), Cow::Borrowed(p) if p == plain));
    }
}

#[test]
fn english_filter_matches_hydra() {
    let keep = [
        "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.02> .",
        "<http://rdf.freebase.com/ns/g.11> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/type.x> .",
        "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> \"x\" .",
        "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> \"x\"@en .",
        "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> \"1\"^^<http://www.w3.org/2001/XMLSchema#int> .",
    ];
    let drop = [
        "<http://rdf.freebase.com/ns/type.x> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.02> .",
        "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> \"x\"@fr .",
        "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> <http://www.w3.org/2000/01/rdf-schema#label> .",
        "<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/p> _:b .",
        "_:b <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.02> .",
        "<http://example.org/m.01> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.02> .",
    ];
    for l in keep {
        assert!(english(&parse(l)), "{l}");
    }
    for l in drop {
        assert!(!english(&parse(l)), "{l}");
    }
}

fn read_str(content: &[u8], opts: FreebaseOptions) -> VecSink {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fb.nt");
    std::fs::File::create(&p)
        .unwrap()
        .write_all(content)
        .unwrap();
    let options = FormatOptions::Freebase(opts);
    let ctx = InputCtx::local(p.to_str().unwrap(), &options);
    let mut sink = VecSink::default();
    read(&ctx, &mut sink).unwrap();
    sink
}

#[test]
fn builds_triples_and_names() {
    let data = concat!(
        "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Caf\\u00e9 \\\"X\\\"\"@en\t.\n",
        "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/type.object.name>\t\"Le Caf\u{e9}\"@fr\t.\n",
        "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/film.film.directed_by>\t<http://rdf.freebase.com/ns/m.0b>\t.\n",
        "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/type.object.type>\t<http://rdf.freebase.com/ns/film.film>\t.\n",
        "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/film.film.initial_release_date>\t\"1999-04-02\"^^<http://www.w3.org/2001/XMLSchema#date>\t.\n",
        "<http://rdf.freebase.com/ns/m.0a>\t<http://www.w3.org/2002/07/owl#sameAs>\t<http://example.org/x>\t.\n",
        "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/common.topic.alias>\t\"Cafe X\"@en\t.\n",
        "<http://rdf.freebase.com/ns/m.0a>\t<http://rdf.freebase.com/ns/common.topic.alias>\t\"Das Caf\u{e9}\"@de\t.\n",
    );
    let s = read_str(data.as_bytes(), FreebaseOptions::default());
    let t = s.edges();
    assert_eq!(t.len(), 5, "{t:#?}");
    // The entity edge is a `triples` row; the name, type and date are `literals`.
    let entity_edges: Vec<_> = s.triples().iter().map(|t| t.object.clone()).collect();
    assert_eq!(entity_edges, ["m.0b"]);
    let literal_kinds: Vec<_> = s.literals().iter().map(|t| t.object_kind.clone()).collect();
    assert_eq!(literal_kinds, ["literal", "iri", "literal", "literal"]);
    assert_eq!(t[0].subject, "m.0a");
    assert_eq!(t[0].predicate, "type.object.name");
    assert_eq!(t[0].object, "Caf\u{e9} \"X\"");
    assert_eq!(t[0].lang.as_deref(), Some("en"));
    assert_eq!(t[0].object_kind, "literal");
    assert_eq!(t[0].line, Some(1));
    assert_eq!(
        (t[1].object.as_str(), t[1].object_kind.as_str()),
        ("m.0b", "entity")
    );
    assert_eq!(
        (t[2].object.as_str(), t[2].object_kind.as_str()),
        ("film.film", "iri")
    );
    assert_eq!(t[3].datatype.as_deref(), Some("xsd:date"));
    assert_eq!(t[3].line, Some(5));
    assert_eq!(t[0].source, "fb.nt");
    assert_eq!(
        t[1].id,
        stable_id(&[
            "freebase",
            "fb.nt",
            "m.0a",
            "film.film.directed_by",
            "m.0b",
            "",
            ""
        ])
    );
    let e = s.entities();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].key, "m.0a");
    assert_eq!(e[0].label.as_deref(), Some("Caf\u{e9} \"X\""));
    assert_eq!(e[0].id, stable_id(&["freebase", "entity", "m.0a", "en"]));
    // The English alias is a row of its own; the German one is dropped.
    assert_eq!(
        (
            e[1].key.as_str(),
            e[1].label.as_deref(),
            e[1].aliases.clone()
        ),
        ("m.0a", None, vec!["Cafe X".to_string()])
    );
    assert_eq!(
        e[1].id,
        stable_id(&["freebase", "alias", "m.0a", "en", "Cafe X"])
    );
    assert!(s.quarantine().is_empty());

    let all = read_str(
        data.as_bytes(),
        FreebaseOptions {
            english_only: false,
            names: false,
            ..Default::default()
        },
    );
    assert_eq!(all.edges().len(), 8);
    assert!(all.entities().is_empty());
    assert_eq!(all.edges()[5].object, "http://example.org/x");
    assert_eq!(
        all.edges()[5].predicate,
        "http://www.w3.org/2002/07/owl#sameAs"
    );
}

#[test]
fn identical_edges_share_an_id() {
    let l = "<http://rdf.freebase.com/ns/m.0a> <http://rdf.freebase.com/ns/p> <http://rdf.freebase.com/ns/m.0b> .\n";
    let s = read_str(format!("{l}{l}").as_bytes(), FreebaseOptions::default());
    let t = s.triples();
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].id, t[1].id);
    assert_eq!((t[0].line, t[1].line), (Some(1), Some(2)));
}
