//! HippoRAG's on-disk OpenIE result, so HippoRAG-family code reuses our extractions:
//!
//! ```json
//! {"docs": [{"idx": "chunk-<md5(title + "\n" + text)>", "passage": "...",
//!            "extracted_entities": [...], "extracted_triples": [[s, p, o], ...]}],
//!  "avg_ent_chars": 9.5, "avg_ent_words": 1.75}
//! ```
//!
//! [`ExportWriter`] renders it piece by piece (docs first, the averages at the end), so a
//! corpus of any size is exported with memory for one passage. Averages are over every
//! extracted entity of every doc, characters counted as Python's `len` (code points) and
//! words as `str.split()`, rounded to 4 places; 0 without entities.
//!
//! [`entity_key`] is the normalised key of an entity that the `triples` table stores in
//! `subject` / `object` (HippoRAG's `text_processing`: lowercase, every character that is
//! not a letter, digit or space becomes a space, spaces collapsed, trimmed; letters of any
//! script are kept).

use md5::{Digest, Md5};
use serde_json::json;

/// `chunk-` + the hex MD5 of `title + "\n" + text`.
pub fn chunk_id(title: &str, text: &str) -> String {
    let mut h = Md5::new();
    h.update(title.as_bytes());
    h.update(b"\n");
    h.update(text.as_bytes());
    format!("chunk-{}", hex::encode(h.finalize()))
}

/// The normalised key of an entity (see the module docs).
pub fn entity_key(s: &str) -> String {
    let mapped: String = s
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One doc of the export as JSON (one line).
pub fn doc_json(idx: &str, passage: &str, entities: &[String], triples: &[[String; 3]]) -> String {
    json!({
        "idx": idx,
        "passage": passage,
        "extracted_entities": entities,
        "extracted_triples": triples,
    })
    .to_string()
}

/// Writes the export as a sequence of byte chunks.
#[derive(Debug, Default)]
pub struct ExportWriter {
    docs: u64,
    entities: u64,
    chars: u64,
    words: u64,
}

impl ExportWriter {
    pub fn new() -> ExportWriter {
        ExportWriter::default()
    }

    /// The bytes of one doc (with the opening `{"docs": [` before the first one).
    pub fn doc(
        &mut self,
        idx: &str,
        passage: &str,
        entities: &[String],
        triples: &[[String; 3]],
    ) -> String {
        self.push(&doc_json(idx, passage, entities, triples), entities)
    }

    /// The bytes of one doc already rendered by [`doc_json`] (whose extracted entities are
    /// `entities`): the same bytes [`ExportWriter::doc`] gives, so docs rendered apart (by
    /// the tasks of a sharded run) join into the export one run writes.
    pub fn push(&mut self, doc: &str, entities: &[String]) -> String {
        let mut out = String::new();
        out.push_str(if self.docs == 0 { "{\"docs\": [" } else { ", " });
        self.docs += 1;
        for e in entities {
            self.entities += 1;
            self.chars += e.chars().count() as u64;
            self.words += e.split_whitespace().count() as u64;
        }
        out.push_str(doc);
        out
    }

    /// The closing bytes: the end of `docs` and the averages.
    pub fn finish(&self) -> String {
        let (chars, words) = self.averages();
        let head = if self.docs == 0 { "{\"docs\": []" } else { "]" };
        format!(
            "{head}, \"avg_ent_chars\": {}, \"avg_ent_words\": {}}}\n",
            json!(chars),
            json!(words)
        )
    }

    /// (avg_ent_chars, avg_ent_words), rounded to 4 places.
    pub fn averages(&self) -> (f64, f64) {
        if self.entities == 0 {
            return (0.0, 0.0);
        }
        let r = |x: u64| (x as f64 / self.entities as f64 * 1e4).round() / 1e4;
        (r(self.chars), r(self.words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn chunk_ids_are_hipporags() {
        // hashlib.md5("Lake Zell\nA lake.".encode()).hexdigest()
        assert_eq!(
            chunk_id("Lake Zell", "A lake."),
            format!(
                "chunk-{}",
                hex::encode(Md5::digest("Lake Zell\nA lake.".as_bytes()))
            )
        );
        assert_eq!(chunk_id("", "").len(), "chunk-".len() + 32);
        assert_eq!(chunk_id("", ""), "chunk-68b329da9893e34099c7d8ad5cb9c940");
    }

    #[test]
    fn entity_keys_fold_case_and_punctuation() {
        assert_eq!(entity_key("  Zell am See!"), "zell am see");
        assert_eq!(entity_key("O'Neil, Shaquille"), "o neil shaquille");
        assert_eq!(entity_key("Ünïcödé — Straße"), "ünïcödé straße");
        assert_eq!(entity_key("..."), "");
    }

    #[test]
    fn the_export_is_one_json_document() {
        let mut w = ExportWriter::new();
        let mut s = w.doc(
            "chunk-1",
            "t\np",
            &["Ada Lovelace".into(), "London".into()],
            &[["Ada Lovelace".into(), "born in".into(), "London".into()]],
        );
        s.push_str(&w.doc("chunk-2", "u\nq", &["X".into()], &[]));
        s.push_str(&w.finish());
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["docs"].as_array().unwrap().len(), 2);
        assert_eq!(v["docs"][0]["extracted_triples"][0][1], "born in");
        // (12 + 6 + 1) / 3 chars, (2 + 1 + 1) / 3 words
        assert_eq!(v["avg_ent_chars"], 6.3333);
        assert_eq!(v["avg_ent_words"], 1.3333);
        let empty: Value = serde_json::from_str(&ExportWriter::new().finish()).unwrap();
        assert_eq!(empty["docs"], Value::Array(vec![]));
        assert_eq!(empty["avg_ent_chars"], 0.0);
    }
}
