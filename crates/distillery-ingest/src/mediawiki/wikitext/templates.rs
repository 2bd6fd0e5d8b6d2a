//! Templates: the text of the few inline templates that are kept, and infobox arguments as
//! [`InfoboxField`]s.

use distillery_core::InfoboxField;

use super::inline::clean_fragment_ctx;
use super::strip::{Ctx, find_top, split_top, strip_into};

pub(super) fn normalize_name(s: &str) -> String {
    let s = s.replace('_', " ");
    let mut out = String::with_capacity(s.len());
    for w in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Positional (unnamed) arguments of a template.
fn positional<'s>(args: &[&'s str]) -> Vec<&'s str> {
    args.iter()
        .copied()
        .filter(|a| find_top(a, b'=').is_none())
        .map(str::trim)
        .collect()
}

fn named<'s>(args: &[&'s str], key: &str) -> Option<&'s str> {
    args.iter().find_map(|a| {
        let eq = find_top(a, b'=')?;
        (a[..eq].trim() == key).then(|| a[eq + 1..].trim())
    })
}

fn date_from(args: &[&str]) -> String {
    let nums: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()))
        .take(3)
        .collect();
    match nums.as_slice() {
        [y, m, d] => format!("{y}-{m:0>2}-{d:0>2}"),
        [y, m] => format!("{y}-{m:0>2}"),
        [y] => y.to_string(),
        _ => args.first().copied().unwrap_or("").to_string(),
    }
}

/// The wikitext an inline template stands for, or `None` to drop it.
fn expand(name: &str, args: &[&str]) -> Option<String> {
    let pos = positional(args);
    let p = |i: usize| pos.get(i).copied().unwrap_or("");
    if let Some((func, arg)) = name.split_once(':') {
        return match func.trim().to_lowercase().as_str() {
            "formatnum" | "lc" | "uc" | "lcfirst" | "ucfirst" => Some(arg.trim().to_string()),
            _ => None,
        };
    }
    let lower = name.to_lowercase();
    let text = match lower.as_str() {
        "lang" | "sort" | "color" | "colour" | "url" => {
            if pos.len() > 1 { p(1) } else { p(0) }.to_string()
        }
        "nowrap" | "small" | "smaller" | "big" | "larger" | "nobold" | "noitalic" | "em"
        | "strong" | "sup" | "sub" | "abbr" | "ipa" | "mvar" | "math" | "var" | "code" | "kbd"
        | "samp" | "tt" | "small caps" | "smallcaps" | "sc" | "flag" | "flagcountry" | "flagu"
        | "nts" | "ntsh" | "nihongo" | "visible anchor" | "tooltip" | "center" | "nowrap begin"
        | "lang-x" | "transl" | "keypress" | "mono" | "highlight" | "linktext" => p(0).to_string(),
        "sortname" => format!("{} {}", p(0), p(1)),
        "convert" | "cvt" => {
            let range = [
                "to", "-", "–", "and", "or", "by", "x", "×", "+/-", "to(-)", "and(-)",
            ];
            if pos.len() >= 4 && range.contains(&p(1)) {
                format!("{} {} {} {}", p(0), p(1), p(2), p(3))
            } else {
                format!("{} {}", p(0), p(1))
            }
        }
        "ill" | "interlanguage link" | "interlanguage link multi" => {
            let label = named(args, "lt").unwrap_or(p(0));
            format!("[[{}|{}]]", p(0), label)
        }
        "ubl" | "unbulleted list" | "plainlist" | "plain list" | "flatlist" | "flat list"
        | "bulleted list" | "blist" => pos.join("\n"),
        "hlist" => pos.join(" · "),
        "birth date" | "birth date and age" | "death date" | "death date and age"
        | "start date" | "end date" | "start date and age" | "end date and age" | "dob" | "bda"
        | "dda" => date_from(&pos),
        "circa" | "c." => format!("c. {}", p(0)),
        "nbsp" => " ".to_string(),
        "ndash" => "–".to_string(),
        "mdash" => "—".to_string(),
        "snd" | "spaced ndash" | "spaced en dash" => " – ".to_string(),
        "!" => "&#124;".to_string(),
        "=" => "&#61;".to_string(),
        "yes" | "no" | "partial" | "won" | "nom" | "n/a" | "na" | "dunno" => {
            let default = match lower.as_str() {
                "yes" => "Yes",
                "no" => "No",
                "partial" => "Partial",
                "won" => "Won",
                "nom" => "Nominated",
                "dunno" => "?",
                _ => "N/A",
            };
            if p(0).is_empty() { default } else { p(0) }.to_string()
        }
        _ if lower.starts_with("lang-") || lower.starts_with("ipa-") => p(0).to_string(),
        _ => return None,
    };
    Some(text)
}

pub(super) fn template(inner: &str, out: &mut String, ctx: &mut Ctx<'_>, depth: usize) {
    let parts = split_top(inner, b'|');
    let mut name = parts[0].trim();
    for prefix in ["subst:", "safesubst:", "Template:", "template:", "msgnw:"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            name = rest.trim();
        }
    }
    if name.starts_with('#') || name.starts_with('{') {
        return;
    }
    let name = normalize_name(name);
    let args = &parts[1..];
    if name
        .get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("infobox"))
    {
        if ctx.infobox.is_some() {
            infobox(&name, args, ctx, depth);
        }
        return;
    }
    if let Some(text) = expand(&name, args) {
        strip_into(&text, out, ctx, depth);
    }
}

pub(super) fn infobox(name: &str, args: &[&str], ctx: &mut Ctx<'_>, depth: usize) {
    for arg in args {
        let Some(eq) = find_top(arg, b'=') else {
            continue;
        };
        let key = normalize_name(arg[..eq].trim());
        if key.is_empty() {
            continue;
        }
        let mut sub = Ctx {
            title: ctx.title,
            infobox: ctx.infobox.as_deref_mut(),
        };
        let value = clean_fragment_ctx(&arg[eq + 1..], &mut sub, depth).text();
        if value.is_empty() {
            continue;
        }
        if let Some(fields) = ctx.infobox.as_deref_mut() {
            fields.push(InfoboxField {
                template: name.to_string(),
                key,
                value,
            });
        }
    }
}
