//! The pipeline file reference (`docs/pipelines.md`), generated from the options types: the
//! JSON schemas `schemars` derives from them (option names, types, defaults and doc comments)
//! for the top-level tables, every reader's options ([`FormatOptions::schema_for`]) and every
//! registered stage's ([`crate::stages::Stage::options_schema`]). A test keeps the committed
//! file equal to [`pipelines`], so the reference cannot drift from the code; `DISTILLERY_BLESS=1
//! cargo test -p distillery-exec reference` rewrites it.

use std::fmt::Write;

use distillery_core::spec::{
    BudgetSpec, Format, FormatOptions, LlmSpec, PriceSpec, RunSpec, input_schema, stage_schema,
};
use serde_json::Value;

use crate::contract::Partitioning;
use crate::stages::REGISTRY;

/// The whole reference, as Markdown.
pub fn pipelines() -> String {
    let mut o = String::new();
    o.push_str(
        "# Pipeline file reference\n\n\
         Generated from the options types by `DISTILLERY_BLESS=1 cargo test -p distillery-exec \
         reference` (a test fails when this file and the code disagree). Every table is \
         strict: an unknown key is an error, and `distillery validate` reports all of them at \
         once. `--set key.path=value` overrides any value (`stages.<name>.options.<option>`, \
         `inputs.<name>.paths`, array elements by index or `name`).\n\n\
         ## Top level\n\n\
         | key | type | default | what it is |\n|---|---|---|---|\n\
         | `version` | integer | required | the file format version: `1` |\n\
         | `name` | string | `pipeline` | the pipeline's name, in manifests and summaries |\n\
         | `description` | string | none | free text |\n\
         | `output` | string | required | where the run writes: a path, `file://`, `s3://`, \
         `gs://` or `az://` URL |\n\n",
    );
    section(&mut o, "## `[run]`", &schemars::schema_for!(RunSpec));
    section(&mut o, "## `[[inputs]]`", &input_schema());
    o.push_str("### Reader options\n\n");
    for f in Format::ALL {
        let schema = FormatOptions::schema_for(f);
        let title = format!("#### `format = \"{}\"`", f.name());
        section(&mut o, &title, &schema);
    }
    section(&mut o, "## `[[stages]]`", &stage_schema());
    o.push_str("### Stages and their tasks\n\n");
    o.push_str(
        "Every stage kind of this build (`stages::REGISTRY`), and how a stage of it is cut into \
         tasks: one task, one per shard (reading that shard of every table), or one per shard \
         of the questions (reading every context and KB part), then a merge task on the next \
         level.\n\n| kind | teacher | tasks | merge task |\n|---|---|---|---|\n",
    );
    for s in REGISTRY {
        let tasks = match s.partitioning() {
            Partitioning::Whole => "one",
            Partitioning::Shards => "one per shard",
            Partitioning::Questions => "one per shard of the questions",
        };
        o.push_str(&format!(
            "| `{}` | {} | {tasks} | {} |\n",
            s.kind(),
            if s.uses_llm() { "yes" } else { "no" },
            if s.merges() { "yes" } else { "no" }
        ));
    }
    o.push_str(
        "\n### Output tables\n\nEvery table a stage or reader may write \
         (`distillery_core::TABLES`): what a row is, whether its rows follow their questions' \
         shards (a stage cut by questions reads its own shard of them and every other table \
         whole), and whether `hseq verify` decodes them back from their segments.\n\n\
         | table | a row | by question | hseq source |\n|---|---|---|---|\n",
    );
    for t in &distillery_core::TABLES {
        let yes = |b: bool| if b { "yes" } else { "no" };
        o.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            t.name,
            t.row,
            yes(t.by_question),
            yes(t.hseq_source)
        ));
    }
    o.push_str("\n### Stage options\n\n");
    for s in REGISTRY {
        let llm = if s.uses_llm() {
            " (calls the `[llm]` server)"
        } else {
            ""
        };
        let title = format!("#### `kind = \"{}\"`{llm}", s.kind());
        section(&mut o, &title, &s.options_schema());
    }
    section(&mut o, "## `[llm]`", &schemars::schema_for!(LlmSpec));
    section(
        &mut o,
        "### `[llm.price]`",
        &schemars::schema_for!(PriceSpec),
    );
    section(
        &mut o,
        "### `[llm.budget]`",
        &schemars::schema_for!(BudgetSpec),
    );
    o.truncate(o.trim_end().len());
    o.push('\n');
    o
}

/// A heading, the type's own doc comment, and a table of its properties.
fn section(o: &mut String, title: &str, schema: &schemars::Schema) {
    let v = schema.as_value();
    let _ = writeln!(o, "{title}\n");
    if let Some(d) = v.get("description").and_then(Value::as_str) {
        let _ = writeln!(o, "{}\n", one_line(d));
    }
    let Some(props) = v.get("properties").and_then(Value::as_object) else {
        o.push_str("No options.\n\n");
        return;
    };
    if props.is_empty() {
        o.push_str("No options.\n\n");
        return;
    }
    let required: Vec<&str> = v
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    o.push_str("| option | type | default | what it does |\n|---|---|---|---|\n");
    for (name, p) in props {
        let default = match p.get("default") {
            Some(Value::Null) | None if required.contains(&name.as_str()) => "required".into(),
            Some(Value::Null) | None => "none".into(),
            Some(d) => format!("`{d}`"),
        };
        let what = p
            .get("description")
            .and_then(Value::as_str)
            .map(one_line)
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "| `{name}` | {} | {default} | {} |",
            type_of(p, v),
            what.replace('|', "\\|")
        );
    }
    o.push('\n');
}

/// A property's type in words: `string`, `integer`, `array of string`, `table`.
fn type_of(p: &Value, root: &Value) -> String {
    if let Some(r) = p.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        let target = root.pointer(&format!("/$defs/{name}"));
        return match target {
            Some(t) if t.get("properties").is_some() => "table".to_string(),
            Some(t) => type_of(t, root),
            None => name.to_string(),
        };
    }
    if let Some(c) = p.get("const") {
        return format!(
            "`{}`",
            c.as_str().map_or_else(|| c.to_string(), str::to_string)
        );
    }
    if let Some(vs) = p.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = vs
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| {
                format!(
                    "`{}`",
                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                )
            })
            .collect();
        return names.join(" or ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = p.get(key).and_then(Value::as_array) {
            let mut names: Vec<String> = Vec::new();
            for a in alts {
                if a.get("type").and_then(Value::as_str) == Some("null") {
                    continue;
                }
                let t = type_of(a, root);
                if !names.contains(&t) {
                    names.push(t);
                }
            }
            return names.join(" or ");
        }
    }
    let kinds: Vec<&str> = match p.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let kinds: Vec<String> = kinds
        .into_iter()
        .filter(|k| *k != "null")
        .map(|k| match (k, p.get("items")) {
            ("array", Some(items)) => format!("array of {}", type_of(items, root)),
            ("object", _) => "table".to_string(),
            ("number", _) => "number".to_string(),
            (k, _) => k.to_string(),
        })
        .collect();
    if kinds.is_empty() {
        "any".to_string()
    } else {
        kinds.join(" or ")
    }
}

/// A doc comment as one Markdown line (paragraph breaks kept as `<br>`).
fn one_line(d: &str) -> String {
    d.split("\n\n")
        .map(|para| para.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("<br>")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/pipelines.md` is what the options types say; `DISTILLERY_BLESS=1` rewrites it.
    #[test]
    fn reference_matches_the_options_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/pipelines.md");
        let want = pipelines();
        if std::env::var_os("DISTILLERY_BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/pipelines.md is not what the options types say: regenerate it with \
             `DISTILLERY_BLESS=1 cargo test -p distillery-exec reference` and commit it"
        );
        // Every option of every stage and reader is in it, with its doc comment.
        for s in REGISTRY {
            let v = s.options_schema();
            for (name, p) in v.as_value()["properties"].as_object().unwrap() {
                assert!(
                    want.contains(&format!("| `{name}` |")),
                    "{}.{name}",
                    s.kind()
                );
                assert!(
                    p.get("description").is_some(),
                    "stage `{}` option `{name}` has no doc comment",
                    s.kind()
                );
            }
        }
        for f in Format::ALL {
            let v = FormatOptions::schema_for(f);
            if let Some(props) = v.as_value()["properties"].as_object() {
                for (name, p) in props {
                    assert!(
                        p.get("description").is_some(),
                        "reader `{f}` option `{name}` has no doc comment"
                    );
                }
            }
        }
    }
}
