//! Robust parsing of NER and OpenIE answers.
//!
//! A model's answer is rarely just the JSON: it comes in a Markdown fence, after a sentence
//! of prose, or cut off when the answer ran out of tokens. [`extract_json`] takes the first
//! JSON object or array in the text (inside a fence when there is one), ignores what follows
//! it, and repairs a truncated one by cutting back to the last complete element and closing
//! what is still open. The NER answer must then hold `named_entities` (a list of strings);
//! the OpenIE answer `triples` (a list of lists): only lists of exactly three non-empty
//! strings are kept, duplicates dropped in order, and the rest counted. An answer that does
//! not have the key is invalid: the stage quarantines it, and the cache never holds it as a
//! result.
//!
//! The parsed values are what the cache stores next to the raw answer; [`NerParser`] and
//! [`OpenIeParser`] carry the version that the cache compares, so a change here (bump the
//! version) re-parses every cached answer without calling the model again.

use std::collections::HashSet;

use distillery_llm::Parser;
use serde_json::{Value, json};

/// The first JSON value of a model answer, and whether it had to be repaired.
pub fn extract_json(raw: &str) -> Result<(Value, bool), String> {
    let text = unfence(raw);
    let start = text
        .find(['{', '['])
        .ok_or_else(|| "no JSON object in the answer".to_string())?;
    let body = &text[start..];
    let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    match stream.next() {
        Some(Ok(v)) => Ok((v, false)),
        Some(Err(e)) if e.is_eof() => {
            let fixed = repair(body).ok_or_else(|| format!("truncated JSON: {e}"))?;
            serde_json::from_str::<Value>(&fixed)
                .map(|v| (v, true))
                .map_err(|e| format!("truncated JSON that cannot be repaired: {e}"))
        }
        Some(Err(e)) => Err(format!("bad JSON: {e}")),
        None => Err("no JSON object in the answer".to_string()),
    }
}

/// The inside of the first Markdown code fence, or the whole text when there is none. An
/// unclosed fence (the answer was cut off) runs to the end.
fn unfence(raw: &str) -> &str {
    let Some(i) = raw.find("```") else {
        return raw;
    };
    let after = &raw[i + 3..];
    // Skip the info string (`json`) up to the end of the line.
    let body = match after.find('\n') {
        Some(nl)
            if after[..nl]
                .trim()
                .chars()
                .all(|c| c.is_ascii_alphanumeric()) =>
        {
            &after[nl + 1..]
        }
        _ => after,
    };
    match body.find("```") {
        Some(j) => &body[..j],
        None => body,
    }
}

/// Closes a JSON text that was cut off: keeps it up to the end of its last complete element
/// and closes the containers still open. `None` when nothing complete is left.
fn repair(body: &str) -> Option<String> {
    let mut stack: Vec<u8> = Vec::new();
    let mut in_str = false;
    let mut escaped = false;
    // (cut position, open containers at that position)
    let mut safe: Option<(usize, Vec<u8>)> = None;
    for (i, b) in body.bytes().enumerate() {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => stack.push(b),
            b'}' | b']' => {
                stack.pop();
                if stack.is_empty() {
                    return Some(body[..=i].to_string());
                }
                safe = Some((i + 1, stack.clone()));
            }
            b',' => safe = Some((i, stack.clone())),
            _ => {}
        }
    }
    let (cut, open) = safe?;
    let mut s = body[..cut].trim_end().trim_end_matches(',').to_string();
    // A cut right after an object key's colon cannot happen (cuts are at commas and closing
    // brackets), so closing the containers gives valid JSON.
    for c in open.iter().rev() {
        s.push(if *c == b'{' { '}' } else { ']' });
    }
    Some(s)
}

fn clean(s: &str) -> Option<String> {
    let t = s.split_whitespace().collect::<Vec<_>>().join(" ");
    (!t.is_empty()).then_some(t)
}

/// What an NER answer holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Entities {
    pub entities: Vec<String>,
    /// Items that were not non-empty strings, or duplicates.
    pub dropped: u32,
    pub repaired: bool,
}

/// Parses an NER answer: `{"named_entities": [...]}`.
pub fn parse_entities(raw: &str) -> Result<Entities, String> {
    let (v, repaired) = extract_json(raw)?;
    let list = v
        .get("named_entities")
        .and_then(Value::as_array)
        .ok_or_else(|| "the answer has no `named_entities` list".to_string())?;
    let mut seen = HashSet::new();
    let mut out = Entities {
        entities: Vec::new(),
        dropped: 0,
        repaired,
    };
    for item in list {
        match item.as_str().and_then(clean) {
            Some(e) if seen.insert(e.clone()) => out.entities.push(e),
            _ => out.dropped += 1,
        }
    }
    Ok(out)
}

/// What an OpenIE answer holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Triples {
    pub triples: Vec<[String; 3]>,
    /// Items that were not lists of three non-empty strings, or duplicates.
    pub dropped: u32,
    pub repaired: bool,
}

/// Parses an OpenIE answer: `{"triples": [[s, p, o], ...]}`.
pub fn parse_triples(raw: &str) -> Result<Triples, String> {
    let (v, repaired) = extract_json(raw)?;
    let list = v
        .get("triples")
        .and_then(Value::as_array)
        .ok_or_else(|| "the answer has no `triples` list".to_string())?;
    let mut seen = HashSet::new();
    let mut out = Triples {
        triples: Vec::new(),
        dropped: 0,
        repaired,
    };
    for item in list {
        let t = item.as_array().filter(|a| a.len() == 3).and_then(|a| {
            let s = a[0].as_str().and_then(clean)?;
            let p = a[1].as_str().and_then(clean)?;
            let o = a[2].as_str().and_then(clean)?;
            Some([s, p, o])
        });
        match t {
            Some(t) if seen.insert(t.clone()) => out.triples.push(t),
            _ => out.dropped += 1,
        }
    }
    Ok(out)
}

/// The cache parser of NER answers: stores `{"named_entities", "dropped", "repaired"}`.
#[derive(Debug, Default)]
pub struct NerParser;

impl Parser for NerParser {
    fn version(&self) -> &str {
        "ner-1"
    }

    fn parse(&self, raw: &str) -> Result<Value, String> {
        let e = parse_entities(raw)?;
        Ok(json!({"named_entities": e.entities, "dropped": e.dropped, "repaired": e.repaired}))
    }
}

/// The cache parser of OpenIE answers: stores `{"triples", "dropped", "repaired"}`.
#[derive(Debug, Default)]
pub struct OpenIeParser;

impl Parser for OpenIeParser {
    fn version(&self) -> &str {
        "openie-1"
    }

    fn parse(&self, raw: &str) -> Result<Value, String> {
        let t = parse_triples(raw)?;
        Ok(json!({"triples": t.triples, "dropped": t.dropped, "repaired": t.repaired}))
    }
}

/// Reads back what [`NerParser`] stored.
pub fn entities_of(parsed: &Value) -> Vec<String> {
    parsed
        .get("named_entities")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads back what [`OpenIeParser`] stored.
pub fn triples_of(parsed: &Value) -> Vec<[String; 3]> {
    parsed
        .get("triples")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| {
                    let t = t.as_array()?;
                    Some([
                        t.first()?.as_str()?.to_string(),
                        t.get(1)?.as_str()?.to_string(),
                        t.get(2)?.as_str()?.to_string(),
                    ])
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, p: &str, o: &str) -> [String; 3] {
        [s.to_string(), p.to_string(), o.to_string()]
    }

    #[test]
    fn plain_fenced_and_prose_wrapped_answers_parse() {
        let plain = r#"{"named_entities": ["Ada", "London"]}"#;
        assert_eq!(parse_entities(plain).unwrap().entities, ["Ada", "London"]);
        let fenced =
            "Sure! Here they are:\n```json\n{\"named_entities\": [\"Ada\"]}\n```\nAnything else?";
        assert_eq!(parse_entities(fenced).unwrap().entities, ["Ada"]);
        let prose = "The entities are {\"named_entities\": [\"Ada\"]} as requested {not json}";
        let e = parse_entities(prose).unwrap();
        assert_eq!(e.entities, ["Ada"]);
        assert!(!e.repaired);
    }

    #[test]
    fn truncated_answers_are_cut_back_to_their_last_complete_element() {
        let cut = r#"{"triples": [["Ada", "born in", "London"], ["Ada", "wrote", "No"#;
        let r = parse_triples(cut).unwrap();
        assert_eq!(r.triples, [t("Ada", "born in", "London")]);
        assert!(r.repaired);
        let cut2 = r#"{"triples": [["Ada", "born in", "London"], ["Ada", "wrote"#;
        let r = parse_triples(cut2).unwrap();
        // ["Ada"] is what is left of the second triple: complete, but not a triple.
        assert_eq!(r.triples, [t("Ada", "born in", "London")]);
        assert_eq!(r.dropped, 1);
        let unclosed_fence = "```json\n{\"named_entities\": [\"Ada\", \"Lon";
        let e = parse_entities(unclosed_fence).unwrap();
        assert_eq!(e.entities, ["Ada"]);
        assert!(e.repaired);
        // Nothing complete: invalid.
        assert!(parse_entities(r#"{"named_entities": ["Ad"#).is_err());
    }

    #[test]
    fn invalid_items_are_dropped_and_duplicates_removed_in_order() {
        let raw = r#"{"triples": [["a","b","c"], ["a","b"], ["a","b","c"], [" x ","y\n z",""], ["x","y","z"], "abc", [1,2,3]]}"#;
        let r = parse_triples(raw).unwrap();
        assert_eq!(r.triples, [t("a", "b", "c"), t("x", "y", "z")]);
        assert_eq!(r.dropped, 5);
        let e = parse_entities(r#"{"named_entities": ["A", " A ", 3, "", "B"]}"#).unwrap();
        assert_eq!(e.entities, ["A", "B"]);
        assert_eq!(e.dropped, 3);
    }

    #[test]
    fn answers_without_the_key_or_without_json_are_invalid() {
        assert!(parse_entities("I cannot help with that.").is_err());
        assert!(parse_entities(r#"{"entities": ["A"]}"#).is_err());
        assert!(parse_triples(r#"{"triples": "none"}"#).is_err());
        assert!(parse_triples("<html>502</html>").is_err());
    }

    #[test]
    fn parsers_store_what_the_readers_read_back() {
        let v = OpenIeParser
            .parse(r#"{"triples": [["a","b","c"]]}"#)
            .unwrap();
        assert_eq!(triples_of(&v), [t("a", "b", "c")]);
        let v = NerParser.parse(r#"{"named_entities": ["A"]}"#).unwrap();
        assert_eq!(entities_of(&v), ["A"]);
    }
}
