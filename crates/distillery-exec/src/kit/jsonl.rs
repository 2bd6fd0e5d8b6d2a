//! SFT sample text shared by every stage that writes samples: the split of a sample, its
//! duplicate hash, its JSONL line, LLaMA-Factory's `dataset_info.json`, and a text file
//! written through object_store.

use std::collections::HashMap;

use distillery_core::SftSample;
use distillery_core::id::shard_of;
use distillery_core::summary::ManifestFile;
use distillery_label::sft::neutralise_control_tokens;
use object_store::ObjectStoreExt;
use object_store::buffered::BufWriter;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::error::ExecError;
use crate::store::Location;

/// `train` or `validation` for a sample: by a hash of its question's id (of its own id when it
/// has no question), so every sample of one question (its trajectory steps, each method's,
/// its HANRAG samples) lands in the same split and validation never holds a question that
/// training saw; the same question always lands in the same split, whatever else the run
/// holds.
pub fn sample_split(s: &SftSample, validation_share: f64) -> &'static str {
    let key = match s.question_id.is_empty() {
        true => &s.id,
        false => &s.question_id,
    };
    split_of(key, validation_share)
}

/// `train` or `validation` by a hash of `id`.
pub fn split_of(id: &str, validation_share: f64) -> &'static str {
    const SCALE: u32 = 1_000_000;
    let cut = (validation_share.clamp(0.0, 1.0) * f64::from(SCALE)).round() as u32;
    if shard_of(&format!("split\u{1f}{id}"), SCALE) < cut {
        "validation"
    } else {
        "train"
    }
}

/// 128-bit hash of a sample's messages (roles and contents): equal for exact duplicates.
///
/// Two seeded XXH64 streams (not SHA-1: the hash only finds duplicates within a run, is never
/// written out, and runs over every sample's full text).
pub fn content_hash(s: &SftSample) -> u128 {
    use std::hash::Hasher;
    let mut a = twox_hash::XxHash64::with_seed(0x5eed_0001);
    let mut b = twox_hash::XxHash64::with_seed(0x5eed_0002);
    // Each part behind its length, so that no two message lists feed the same bytes.
    for part in s.messages.iter().flat_map(|m| [&m.role, &m.content]) {
        for h in [&mut a, &mut b] {
            h.write(&(part.len() as u64).to_le_bytes());
            h.write(part.as_bytes());
        }
    }
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// One line of `sft/*.jsonl`: a JSON object with the keys `id`, `messages` (`role`,
/// `content`), `weight`, then the lineage `task, dataset, question_id, segment_ids, method,
/// params` (a JSON object), `template_id, template_version, pipeline_hash, step, steps,
/// sufficient, prompt_tokens, target_tokens, teacher, cache_entries, revisions`, in that
/// order, and a newline. Chat-template
/// control tokens in the contents are broken ([`neutralise_control_tokens`]).
pub fn jsonl_line(s: &SftSample) -> String {
    JsonlLines::default().line(s)
}

/// Writes [`jsonl_line`]s: compact JSON, byte for byte what `serde_json` writes for the same
/// object, with strings escaped eight bytes at a time (a line is mostly prompt text) and the
/// `params` objects rendered once each (the steps of one trajectory share one, the samples
/// of one task often share another).
#[derive(Debug, Default)]
pub struct JsonlLines {
    /// `params` texts → their rendering; cleared when it holds [`PARAMS_CACHED`] of them.
    params: HashMap<String, String>,
}

/// The most `params` renderings a [`JsonlLines`] keeps.
const PARAMS_CACHED: usize = 256;

impl JsonlLines {
    /// The line of `s`.
    pub fn line(&mut self, s: &SftSample) -> String {
        if !self.params.contains_key(&s.params) {
            if self.params.len() >= PARAMS_CACHED {
                self.params.clear();
            }
            // Small: parsed so that it is written as a JSON object (a string when it is not
            // JSON).
            let v = serde_json::from_str::<Value>(&s.params).unwrap_or_else(|_| json!(s.params));
            self.params.insert(s.params.clone(), v.to_string());
        }
        let params = &self.params[&s.params];
        let text: usize = s
            .messages
            .iter()
            .map(|m| m.content.len() + 32)
            .sum::<usize>()
            + s.segment_ids
                .iter()
                .chain(&s.revisions)
                .map(|i| i.len() + 3)
                .sum::<usize>();
        let mut o = String::with_capacity(text + params.len() + 512);
        o.push_str("{\"id\":");
        json_str(&mut o, &s.id);
        o.push_str(",\"messages\":[");
        for (i, m) in s.messages.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            o.push_str("{\"role\":");
            json_str(&mut o, &m.role);
            o.push_str(",\"content\":");
            // The samples' writers neutralise them first; this keeps a raw control token
            // out of the files whatever path a sample took.
            match neutralise_control_tokens(&m.content) {
                Some(t) => json_str(&mut o, &t),
                None => json_str(&mut o, &m.content),
            }
            o.push('}');
        }
        o.push_str("],\"weight\":");
        o.push_str(&Value::from(s.weight).to_string());
        push_string_fields(
            &mut o,
            &[
                ("task", &s.task),
                ("dataset", &s.dataset),
                ("question_id", &s.question_id),
            ],
        );
        push_list(&mut o, "segment_ids", &s.segment_ids);
        push_string_fields(&mut o, &[("method", &s.method)]);
        push_key(&mut o, "params");
        o.push_str(params);
        push_string_fields(
            &mut o,
            &[
                ("template_id", &s.template_id),
                ("template_version", &s.template_version),
                ("pipeline_hash", &s.pipeline_hash),
            ],
        );
        let opt = |v: Option<String>| v.unwrap_or_else(|| "null".to_string());
        push_key(&mut o, "step");
        o.push_str(&opt(s.step.map(|n| n.to_string())));
        push_key(&mut o, "steps");
        o.push_str(&opt(s.steps.map(|n| n.to_string())));
        push_key(&mut o, "sufficient");
        o.push_str(&opt(s.sufficient.map(|b| b.to_string())));
        push_key(&mut o, "prompt_tokens");
        o.push_str(&s.prompt_tokens.to_string());
        push_key(&mut o, "target_tokens");
        o.push_str(&s.target_tokens.to_string());
        push_key(&mut o, "teacher");
        match &s.teacher {
            Some(t) => json_str(&mut o, t),
            None => o.push_str("null"),
        }
        push_list(&mut o, "cache_entries", &s.cache_entries);
        push_list(&mut o, "revisions", &s.revisions);
        o.push_str("}\n");
        o
    }
}

/// `,"key":"value"` for each pair.
fn push_string_fields(o: &mut String, fields: &[(&str, &str)]) {
    for (key, value) in fields {
        push_key(o, key);
        json_str(o, value);
    }
}

/// `,"key":[...]` of strings.
fn push_list(o: &mut String, key: &str, values: &[String]) {
    push_key(o, key);
    o.push('[');
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        json_str(o, v);
    }
    o.push(']');
}

/// `,"key":`.
fn push_key(o: &mut String, key: &str) {
    o.push_str(",\"");
    o.push_str(key);
    o.push_str("\":");
}

/// Appends `s` as a JSON string literal, escaped as `serde_json` escapes it: `\"`, `\\`,
/// `\b \t \n \f \r`, other control chars as `\u00xx` (lowercase hex), everything else as
/// it is. Runs without anything to escape are found eight bytes at a time and copied whole.
pub fn json_str(o: &mut String, s: &str) {
    /// Whether any byte of `w` is below 0x20, `"` or `\` (exact: the classic SWAR tests,
    /// which never miss and never report a byte that is not there).
    fn needs_escape(w: u64) -> bool {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
        let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        (below_space | zero(w ^ (ONES * u64::from(b'"'))) | zero(w ^ (ONES * u64::from(b'\\'))))
            != 0
    }
    let b = s.as_bytes();
    o.reserve(b.len() + 2);
    o.push('"');
    let mut run = 0; // start of the bytes not yet written
    let mut i = 0;
    while i < b.len() {
        if let Some(chunk) = b.get(i..i + 8) {
            let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            if !needs_escape(w) {
                i += 8;
                continue;
            }
        }
        let c = b[i];
        let esc: Option<&str> = match c {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            0..=0x1f => None,
            _ => {
                i += 1;
                continue;
            }
        };
        // Escaped bytes are ASCII, so `run..i` and what follows are char boundaries.
        o.push_str(&s[run..i]);
        match esc {
            Some(e) => o.push_str(e),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                o.push_str("\\u00");
                o.push(char::from(HEX[usize::from(c >> 4)]));
                o.push(char::from(HEX[usize::from(c & 0xf)]));
            }
        }
        i += 1;
        run = i;
    }
    o.push_str(&s[run..]);
    o.push('"');
}

/// The LLaMA-Factory `dataset_info.json` of the SFT files (sharegpt formatting), one entry
/// per split file: `distillery_<split>`.
pub fn dataset_info(splits: &[(&str, &str)]) -> Value {
    let mut o = serde_json::Map::new();
    for (split, file) in splits {
        o.insert(
            format!("distillery_{split}"),
            json!({
                "file_name": file,
                "formatting": "sharegpt",
                "columns": {"messages": "messages"},
                "tags": {
                    "role_tag": "role",
                    "content_tag": "content",
                    "user_tag": "user",
                    "assistant_tag": "assistant",
                    "system_tag": "system"
                }
            }),
        );
    }
    Value::Object(o)
}

/// The buffer of a [`TextFile`], and the reads of [`TextFile::copy_from`]: 8 MiB for an object
/// store (each buffer is a part of a multipart upload, at least 5 MiB on S3); 256 KiB on
/// local disk, where a buffer that stays in the CPU's cache copies several times faster
/// (docs/benchmarks.md, "Scale-out").
fn chunk_bytes(out: &Location) -> usize {
    if out.local_dir.is_some() {
        256 << 10
    } else {
        8 << 20
    }
}

/// A text file (JSONL, JSON) written through object_store under the staging directory.
pub struct TextFile {
    rel: String,
    show: String,
    writer: BufWriter,
    chunk: u64,
    lines: u64,
    bytes: u64,
}

impl TextFile {
    pub fn new(out: &Location, staging: &str, rel: &str) -> TextFile {
        let path = out.path(&format!("{staging}/{rel}"));
        let chunk = chunk_bytes(out);
        TextFile {
            rel: rel.to_string(),
            show: out.show(rel),
            writer: BufWriter::with_capacity(out.store.clone(), path, chunk),
            chunk: chunk as u64,
            lines: 0,
            bytes: 0,
        }
    }

    /// Writes one line (or one whole document: counted as one row).
    pub async fn write(&mut self, line: &str) -> Result<(), ExecError> {
        self.write_counted(line, 1).await
    }

    /// Writes whole lines, counting each.
    pub async fn write_lines(&mut self, text: &str) -> Result<(), ExecError> {
        self.write_counted(text, text.bytes().filter(|b| *b == b'\n').count() as u64)
            .await
    }

    async fn write_counted(&mut self, text: &str, lines: u64) -> Result<(), ExecError> {
        self.writer
            .write_all(text.as_bytes())
            .await
            .map_err(|e| ExecError::output(&self.show, e.to_string()))?;
        self.lines += lines;
        self.bytes += text.len() as u64;
        Ok(())
    }

    /// Appends the whole staged file `rel` (`bytes` long, `rows` lines) by ranged reads of
    /// the buffer's size ([`chunk_bytes`]), where a streamed read of a local file goes 8 KiB
    /// at a time.
    pub async fn copy_from(
        &mut self,
        out: &Location,
        rel: &str,
        bytes: u64,
        rows: u64,
    ) -> Result<(), ExecError> {
        let path = out.path(rel);
        let mut at = 0;
        while at < bytes {
            let end = (at + self.chunk).min(bytes);
            let chunk = out
                .store
                .get_range(&path, at..end)
                .await
                .map_err(|e| ExecError::store(out.show(rel), e))?;
            self.writer
                .write_all(&chunk)
                .await
                .map_err(|e| ExecError::output(&self.show, e.to_string()))?;
            at = end;
        }
        self.bytes += bytes;
        self.lines += rows;
        Ok(())
    }

    pub async fn finish(mut self) -> Result<ManifestFile, ExecError> {
        self.writer
            .shutdown()
            .await
            .map_err(|e| ExecError::output(&self.show, e.to_string()))?;
        Ok(ManifestFile {
            path: self.rel,
            rows: self.lines,
            bytes: self.bytes,
        })
    }
}
