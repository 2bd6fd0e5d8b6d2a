//! The RAS text-to-triple form (paper 002, pat-jj/RAS) and Python's `repr` of a list of
//! strings, which RAS prompts use to show retrieved triples.
//!
//! One triple is `(S> s| P> p| O> o)`; a list is joined with `", "`. WikiOFGraph writes
//! `(<S> s| <P> p| <O> o)`: [`parse`] reads both and [`normalise`] rewrites the second into
//! the first.

/// `(S> s| P> p| O> o)`.
pub fn render_triple(t: &[String; 3]) -> String {
    format!("(S> {}| P> {}| O> {})", t[0], t[1], t[2])
}

/// The triples joined with `", "`.
pub fn render(triples: &[[String; 3]]) -> String {
    triples
        .iter()
        .map(render_triple)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rewrites WikiOFGraph's `<S>`, `<P>`, `<O>` markers into RAS's `S>`, `P>`, `O>`.
pub fn normalise(text: &str) -> String {
    text.replace("(<S> ", "(S> ")
        .replace("| <P> ", "| P> ")
        .replace("| <O> ", "| O> ")
}

/// Parses a target string back into triples: items split on `"), "`, each
/// `(S> s| P> p| O> o)`. Items that do not have the three markers are skipped.
pub fn parse(text: &str) -> Vec<[String; 3]> {
    let text = normalise(text.trim());
    text.split("), ")
        .filter_map(|item| {
            let item = item.trim();
            let item = item.strip_prefix('(').unwrap_or(item);
            let item = item.strip_suffix(')').unwrap_or(item);
            let rest = item.strip_prefix("S> ")?;
            let (s, rest) = rest.split_once("| P> ")?;
            let (p, o) = rest.split_once("| O> ")?;
            Some([s.to_string(), p.to_string(), o.to_string()])
        })
        .collect()
}

/// Python's `repr` of one `str`: single quotes unless the string holds a `'` and no `"`;
/// backslash escapes for `\\`, the quote, `\n`, `\r`, `\t` and other non-printable
/// characters (`\xNN`, `\uNNNN`, `\UNNNNNNNN`), as CPython writes them.
pub fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let n = c as u32;
                if n < 0x100 {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n < 0x10000 {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
        }
    }
    out.push(quote);
    out
}

/// Python's `str.isprintable` for the characters that matter here: controls (Cc), format
/// characters (Cf), separators other than the ASCII space (Zl, Zp, Zs) and surrogates or
/// unassigned code points are not printable.
fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    // Common format characters (Cf).
    !matches!(
        c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F
            | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB
            | 0xE0001 | 0xE0020..=0xE007F
    )
}

/// Python's `repr` of a `list` of `str`: `['a', "b'c"]`, `[]` when empty.
pub fn py_repr_list(items: &[String]) -> String {
    let inner: Vec<String> = items.iter().map(|s| py_repr_str(s)).collect();
    format!("[{}]", inner.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, p: &str, o: &str) -> [String; 3] {
        [s.to_string(), p.to_string(), o.to_string()]
    }

    #[test]
    fn renders_and_parses_the_ras_form() {
        let ts = [t("a", "b", "c"), t("O'Neil", "plays for", "Lakers")];
        let s = render(&ts);
        assert_eq!(
            s,
            "(S> a| P> b| O> c), (S> O'Neil| P> plays for| O> Lakers)"
        );
        assert_eq!(parse(&s), ts);
        assert_eq!(
            parse("(<S> x| <P> y| <O> z), (<S> u| <P> v| <O> w)"),
            [t("x", "y", "z"), t("u", "v", "w")]
        );
        assert_eq!(normalise("(<S> x| <P> y| <O> z)"), "(S> x| P> y| O> z)");
        assert!(parse("nothing here").is_empty());
    }

    #[test]
    fn python_repr_matches_cpython() {
        // Values checked against CPython 3.12: repr([...]).
        let items = [
            "(S> a| P> b| O> c)".to_string(),
            "(S> O'Neil| P> x| O> y)".to_string(),
            "both ' and \"".to_string(),
            "tab\there\\".to_string(),
            "caf\u{e9} \u{200b}\u{7f}".to_string(),
        ];
        assert_eq!(
            py_repr_list(&items),
            r#"['(S> a| P> b| O> c)', "(S> O'Neil| P> x| O> y)", 'both \' and "', 'tab\there\\', 'café \u200b\x7f']"#
        );
        assert_eq!(py_repr_list(&[]), "[]");
    }
}
