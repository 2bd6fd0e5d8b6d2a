//! A deterministic stand-in teacher for the triple extraction prompts, answering through
//! [`crate::fault_server::FaultServer::start_with`]. Used by the CLI and cluster test
//! binaries.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::fault_server::Responder;

/// Capitalised word runs of a text: the stand-in teacher's "entities".
fn capitalised(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    for raw in text.split_whitespace() {
        let w = raw.trim_matches(|c: char| !c.is_alphanumeric());
        // A run ends at punctuation: "Vey. Mara" is two names.
        let ends = raw.ends_with(['.', ',', ';', ':']);
        if w.chars().next().is_some_and(char::is_uppercase) {
            cur.push(w);
        }
        if (ends || !w.chars().next().is_some_and(char::is_uppercase)) && !cur.is_empty() {
            let e = cur.join(" ");
            if !out.contains(&e) {
                out.push(e);
            }
            cur.clear();
        }
    }
    if !cur.is_empty() {
        let e = cur.join(" ");
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// A deterministic teacher: NER = capitalised runs of the passage; OpenIE = each entity
/// "appears with" the next. The passage titled "Oskar Vey" gets a refusal (not JSON).
pub fn teacher() -> Responder {
    Arc::new(|body: &Value| {
        let msgs = body["messages"].as_array().unwrap();
        let user = msgs.last().unwrap()["content"].as_str().unwrap();
        let task = body["response_format"]["json_schema"]["name"]
            .as_str()
            .unwrap_or_default();
        if task == "named_entities" {
            if user.starts_with("Oskar Vey\n") {
                return "I would rather not say.".to_string();
            }
            return json!({ "named_entities": capitalised(user) }).to_string();
        }
        let ents: Vec<String> = user
            .rfind("{\"named_entities\"")
            .and_then(|i| serde_json::from_str::<Value>(&user[i..]).ok())
            .and_then(|v| serde_json::from_value(v["named_entities"].clone()).ok())
            .unwrap_or_default();
        let triples: Vec<[&str; 3]> = ents
            .windows(2)
            .map(|w| [w[0].as_str(), "appears with", w[1].as_str()])
            .collect();
        // Fenced, with prose around it: the parser copes.
        format!(
            "Here you go:\n```json\n{}\n```",
            json!({ "triples": triples })
        )
    })
}
