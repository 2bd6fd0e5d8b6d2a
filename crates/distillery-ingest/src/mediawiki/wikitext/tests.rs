//! Tests of the wikitext cleaner.

use super::*;
use distillery_core::char_slice;

fn clean(s: &str) -> String {
    parse(s, "Page").text
}

pub(crate) fn check_spans(p: &Parsed) {
    let t = &p.text;
    for s in &p.sections {
        assert!(char_slice(t, s.start, s.end).is_some(), "section {s:?}");
        if s.level > 1 {
            assert!(char_slice(t, s.start, s.end).unwrap().starts_with(&s.title));
        }
    }
    for pa in &p.paragraphs {
        let s = &p.sections[pa.section as usize];
        assert!(
            s.start <= pa.start && pa.end <= s.end,
            "{pa:?} outside {s:?}"
        );
        let body = char_slice(t, pa.start, pa.end).unwrap();
        assert!(!body.is_empty() && body.trim() == body, "{body:?}");
    }
    for se in &p.sentences {
        let pa = &p.paragraphs[se.paragraph as usize];
        assert!(pa.start <= se.start && se.end <= pa.end);
        assert!(!char_slice(t, se.start, se.end).unwrap().trim().is_empty());
    }
    for l in &p.links {
        let a = char_slice(t, l.start, l.end).unwrap();
        assert!(!a.is_empty() && a.trim() == a, "link {l:?} -> {a:?}");
    }
}

#[test]
fn links_and_formatting() {
    let p = parse(
        "The '''[[Foo bar|foo]]''' is a [[baz]]s and [[qux (thing)|]] at [http://x.org the site] [http://y.org].",
        "Page",
    );
    assert_eq!(p.text, "The foo is a bazs and qux at the site.");
    let got: Vec<(&str, &str)> = p
        .links
        .iter()
        .map(|l| {
            (
                l.target.as_str(),
                char_slice(&p.text, l.start, l.end).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("Foo bar", "foo"),
            ("Baz", "bazs"),
            ("Qux (thing)", "qux"),
            ("http://x.org", "the site")
        ]
    );
    check_spans(&p);
}

#[test]
fn drops_templates_refs_files_and_comments() {
    let s = "A{{cite|x={{y|z}}}} b<ref name=\"n\">{{c}} [[d]]</ref> c<ref name=n/>.<!-- hidden\n\n-->\n\
             [[File:X.jpg|thumb|A [[caption]] {{x}}]] [[Category:Things]] [[de:Ding]] __TOC__ e &amp; f&nbsp;g &#x41;";
    assert_eq!(clean(s), "A b c.\ne & f g A");
}

#[test]
fn tags_keep_inner_text() {
    assert_eq!(
        clean(
            "a <b>bold</b> <span style=\"x\">s</span> <math>x^2</math> 1 < 2 <sup>3</sup><br/>next"
        ),
        "a bold s 1 < 2 3\nnext"
    );
    assert_eq!(
        clean("<nowiki>[[not a link]] ''x''</nowiki>"),
        "[[not a link]] ''x''"
    );
}

#[test]
fn sections_paragraphs_sentences() {
    let p = parse(
        "Lead one. Lead two.\nStill lead.\n\nSecond para.\n== History ==\nOld times. More.\n=== Early ===\n* item [[a]]\n* item b\n\n== Later ==\nNow.",
        "Page",
    );
    assert_eq!(
        p.text,
        "Lead one. Lead two.\nStill lead.\n\nSecond para.\n\nHistory\n\nOld times. More.\n\nEarly\n\nitem a\nitem b\n\nLater\n\nNow."
    );
    let secs: Vec<(&str, u32)> = p
        .sections
        .iter()
        .map(|s| (s.title.as_str(), s.level))
        .collect();
    assert_eq!(
        secs,
        vec![("Page", 1), ("History", 2), ("Early", 3), ("Later", 2)]
    );
    let t = &p.text;
    assert_eq!(
        char_slice(t, p.sections[0].start, p.sections[0].end).unwrap(),
        "Lead one. Lead two.\nStill lead.\n\nSecond para."
    );
    assert_eq!(
        char_slice(t, p.sections[1].start, p.sections[1].end).unwrap(),
        "History\n\nOld times. More.\n\nEarly\n\nitem a\nitem b"
    );
    assert_eq!(
        char_slice(t, p.sections[3].start, p.sections[3].end).unwrap(),
        "Later\n\nNow."
    );
    let paras: Vec<(&str, i32)> = p
        .paragraphs
        .iter()
        .map(|x| (char_slice(t, x.start, x.end).unwrap(), x.section))
        .collect();
    assert_eq!(
        paras,
        vec![
            ("Lead one. Lead two.\nStill lead.", 0),
            ("Second para.", 0),
            ("Old times. More.", 1),
            ("item a\nitem b", 2),
            ("Now.", 3)
        ]
    );
    let sents: Vec<&str> = p
        .sentences
        .iter()
        .map(|s| char_slice(t, s.start, s.end).unwrap())
        .collect();
    assert_eq!(sents[..3], ["Lead one.", "Lead two.", "Still lead."]);
    check_spans(&p);
}

#[test]
fn infobox_fields() {
    let p = parse(
        "{{Infobox river\n| name = Testa {{small|(river)}}\n| length = {{convert|12|km}}\n| mouth = [[Lake X|the lake]]<ref>r</ref>\n| empty =\n| nested = {{infobox dam|height=3 m}}\n| list = {{ubl|a|b}}\n}}\nThe '''Testa''' flows.",
        "Testa",
    );
    assert_eq!(p.text, "The Testa flows.");
    let f: Vec<(&str, &str, &str)> = p
        .infobox
        .iter()
        .map(|f| (f.template.as_str(), f.key.as_str(), f.value.as_str()))
        .collect();
    assert_eq!(
        f,
        vec![
            ("Infobox river", "name", "Testa (river)"),
            ("Infobox river", "length", "12 km"),
            ("Infobox river", "mouth", "the lake"),
            ("infobox dam", "height", "3 m"),
            ("Infobox river", "list", "a b"),
        ]
    );
}

#[test]
fn tables_are_cut_out() {
    let p = parse(
        "Before.\n== S ==\n{| class=x\n|+ Cap\n! A !! B\n|-\n| 1 || {{n/a}}\n|-\n|\n{|\n| inner\n|}\n|}\nAfter.",
        "Page",
    );
    assert_eq!(p.text, "Before.\n\nS\n\nAfter.");
    assert_eq!(p.tables.len(), 2);
    assert_eq!(p.tables[0].caption.as_deref(), Some("Cap"));
    assert_eq!(p.tables[0].section.as_deref(), Some("S"));
    assert_eq!(p.tables[0].header, vec!["A", "B"]);
    assert_eq!(p.tables[0].rows, vec![vec!["1", "N/A"], vec!["", ""]]);
    assert_eq!(p.tables[1].rows, vec![vec!["inner"]]);
}

#[test]
fn redirects() {
    let p = parse("#REDIRECT [[Target page#Sec]] {{R from move}}", "X");
    assert_eq!(p.redirect.as_deref(), Some("Target page"));
    assert_eq!(p.text, "");
    assert!(p.sections.is_empty());
    assert_eq!(split_redirect("#redirect:[[a]]").1.as_deref(), Some("A"));
    assert_eq!(split_redirect("no").1, None);
}

#[test]
fn pathological_input_is_bounded() {
    let mut s = String::new();
    for _ in 0..20000 {
        s.push_str("{{a|[[b|");
    }
    s.push_str(&"<ref>".repeat(5000));
    s.push_str(&"<math>".repeat(5000));
    s.push_str(&"{|\n".repeat(3000));
    s.push_str(&"[[".repeat(20000));
    s.push_str(&"]]".repeat(20000));
    s.push_str(&"{{x|".repeat(3000));
    s.push_str(&"}}".repeat(3000));
    let t = std::time::Instant::now();
    let p = parse(&s, "P");
    check_spans(&p);
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
}

#[test]
fn random_markup_never_breaks_the_invariants() {
    const TOKENS: &[&str] = &[
        "{{",
        "}}",
        "[[",
        "]]",
        "|",
        "||",
        "\n",
        "\n\n",
        "==",
        "===",
        "\n{|",
        "\n|}",
        "\n|-",
        "\n!",
        "!!",
        "\n|",
        "<ref>",
        "</ref>",
        "<ref name=a/>",
        "<!--",
        "-->",
        "'''",
        "''",
        "&amp;",
        "&#x41;",
        "&#160;",
        "\u{a0}",
        "\t",
        "&",
        ";",
        "é",
        "漢",
        "[http://",
        "[h\u{e9}",
        "]",
        "*",
        ":",
        "=",
        " ",
        "a",
        "Word.",
        "{{Infobox x|",
        "k=",
        "rowspan=2",
        "colspan=3|",
        "<nowiki>",
        "</nowiki>",
        "<br/>",
        "#REDIRECT ",
        "__TOC__",
        "<",
        ">",
        "<b>",
        "</b>",
        "File:",
        "{{lang|de|",
        "{{convert|1|km}}",
        "(",
        ")",
        ",",
        "\n* ",
        "\n== H ==\n",
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..1500 {
        let n = (next() % 120) as usize;
        let s: String = (0..n)
            .map(|_| TOKENS[(next() % TOKENS.len() as u64) as usize])
            .collect();
        let p = parse(&s, "P");
        check_spans(&p);
        for t in &p.tables {
            assert!(t.rows.iter().all(|r| r.len() == t.header.len()), "{s:?}");
        }
    }
}

#[test]
fn unicode_offsets() {
    let p = parse("Ünïcödé [[漢字|漢]] and [[Ωmega]]. Ça va.", "P");
    assert_eq!(p.text, "Ünïcödé 漢 and Ωmega. Ça va.");
    check_spans(&p);
    assert_eq!(p.links[0].start, 8);
    assert_eq!(p.sentences.len(), 2);
}

#[test]
fn named_entities_are_html5_and_numeric_ones_any_code_point() {
    use super::entities::decode_entities;
    // Names beyond HTML 4, astral and two-code-point ones, and the hand-kept basics.
    assert_eq!(
        decode_entities("&alpha;&Delta; &ccaron;&Scaron; &Xopf; &fjlig; &rarr;&amp;&quot;"),
        "αΔ čŠ 𝕏 fj →&\""
    );
    // Spaces become a plain space and invisible characters go, whatever their name.
    assert_eq!(
        decode_entities("a&nbsp;b&ThinSpace;c&emsp13;d&NewLine;e&shy;f&ZeroWidthSpace;g"),
        "a b c d efg"
    );
    // Numeric references: decimal, hex, astral; invalid ones and unknown names stay as text.
    assert_eq!(decode_entities("&#233;&#xE9;&#X1D54F;&#128512;"), "éé𝕏😀");
    assert_eq!(
        decode_entities("&#0; &#xD800; &#x110000; &bogus; &amp &;"),
        "&#0; &#xD800; &#x110000; &bogus; &amp &;"
    );
    assert_eq!(clean("x &alpha;&ndash;&Omega; y"), "x α–Ω y");
}

#[test]
fn the_html5_table_has_every_name() {
    let table = include_str!("html5_entities.txt");
    let names: Vec<&str> = table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(names.len(), 2125);
    for n in names {
        let s = format!("&{n};");
        assert_ne!(super::entities::decode_entities(&s), s, "{n}");
    }
}
