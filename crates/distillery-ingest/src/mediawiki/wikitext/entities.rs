//! HTML entities: decoding named and numeric character references in text.

fn entity(name: &str) -> Option<&'static str> {
    Some(match name {
        "nbsp" | "ensp" | "emsp" | "thinsp" | "numsp" | "puncsp" | "hairsp" => " ",
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        "ndash" => "–",
        "mdash" => "—",
        "minus" => "−",
        "times" => "×",
        "divide" => "÷",
        "deg" => "°",
        "plusmn" => "±",
        "hellip" => "…",
        "laquo" => "«",
        "raquo" => "»",
        "lsquo" => "‘",
        "rsquo" => "’",
        "sbquo" => "‚",
        "ldquo" => "“",
        "rdquo" => "”",
        "bdquo" => "„",
        "bull" => "•",
        "middot" => "·",
        "copy" => "©",
        "reg" => "®",
        "trade" => "™",
        "euro" => "€",
        "pound" => "£",
        "yen" => "¥",
        "cent" => "¢",
        "sect" => "§",
        "para" => "¶",
        "frac12" => "½",
        "frac14" => "¼",
        "frac34" => "¾",
        "sup1" => "¹",
        "sup2" => "²",
        "sup3" => "³",
        "micro" => "µ",
        "prime" => "′",
        "Prime" => "″",
        "larr" => "←",
        "rarr" => "→",
        "uarr" => "↑",
        "darr" => "↓",
        "harr" => "↔",
        "rArr" => "⇒",
        "lArr" => "⇐",
        "hArr" => "⇔",
        "le" => "≤",
        "ge" => "≥",
        "ne" => "≠",
        "asymp" => "≈",
        "infin" => "∞",
        "dagger" => "†",
        "Dagger" => "‡",
        "permil" => "‰",
        "iexcl" => "¡",
        "iquest" => "¿",
        "ordm" => "º",
        "ordf" => "ª",
        "not" => "¬",
        "shy" | "zwj" | "zwnj" | "lrm" | "rlm" => "",
        "alpha" => "α",
        "beta" => "β",
        "gamma" => "γ",
        "delta" => "δ",
        "epsilon" => "ε",
        "lambda" => "λ",
        "mu" => "μ",
        "pi" => "π",
        "sigma" => "σ",
        "omega" => "ω",
        "Delta" => "Δ",
        "Sigma" => "Σ",
        "Omega" => "Ω",
        "eacute" => "é",
        "egrave" => "è",
        "aacute" => "á",
        "agrave" => "à",
        "oacute" => "ó",
        "uacute" => "ú",
        "iacute" => "í",
        "ntilde" => "ñ",
        "ouml" => "ö",
        "uuml" => "ü",
        "auml" => "ä",
        "Ouml" => "Ö",
        "Uuml" => "Ü",
        "Auml" => "Ä",
        "szlig" => "ß",
        "ccedil" => "ç",
        _ => return None,
    })
}

/// Decodes an HTML entity at the start of `s` (which starts with `&`): (text, bytes used).
pub(super) fn entity_at(s: &str) -> Option<(String, usize)> {
    let end = s.as_bytes().iter().take(34).position(|&b| b == b';')?;
    let name = &s[1..end];
    if name.is_empty() {
        return None;
    }
    let text = if name.starts_with('#') {
        crate::mediawiki::xml::decode_char_ref(name)?.to_string()
    } else {
        entity(name)?.to_string()
    };
    Some((text, end + 1))
}

/// Decodes HTML entities in plain text.
pub(crate) fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(off) = s[i..].find('&') {
        out.push_str(&s[i..i + off]);
        let at = i + off;
        match entity_at(&s[at..]) {
            Some((t, n)) => {
                out.push_str(&t);
                i = at + n;
            }
            None => {
                out.push('&');
                i = at + 1;
            }
        }
    }
    out.push_str(&s[i..]);
    out
}
